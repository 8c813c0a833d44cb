//go:build linux

package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Once the runner reported the command's exit status, a cancel, a Kill or
// the executor's Close changes nothing: the result keeps its status and is
// neither aborted nor killed, and Kill reports false. Each iteration stops
// the command in the window between the runner's exit message and the end
// of Cmd.Wait (teardown, drain), where the race used to turn it into
// aborted/killed.
func TestStopAfterExitKeepsStatus(t *testing.T) {
	for _, mode := range []modes.Mode{modes.WorkspaceWrite, modes.DangerFullAccess} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newTestExecutor(t, Config{Mode: mode, KillGrace: testtime.Scale(200 * time.Millisecond)})
			for i := 0; i < 20; i++ {
				// Foreground: the abort lands after the exit message.
				ctx, cancel := context.WithCancel(context.Background())
				j, err := e.launch(ctx, Request{Command: "echo last; exit 3"}, false)
				require.NoError(t, err)
				<-j.cmd.Exited()
				cancel()
				<-j.settled
				r := j.result
				assert.False(t, r.Aborted, "a cancel after the exit aborted the result")
				assert.False(t, r.TimedOut)
				assert.Equal(t, 3, r.ExitCode)
				assert.Equal(t, "last\n", r.Stdout.Text)

				// Background: Kill and a cancel after the exit message.
				ctx, cancel = context.WithCancel(context.Background())
				p, err := e.Start(ctx, Request{Command: "exit 4"})
				require.NoError(t, err)
				<-p.j.cmd.Exited()
				assert.False(t, p.Kill(), "Kill after the command exited reports it ran")
				cancel()
				res, err := p.Wait(context.Background())
				require.NoError(t, err)
				assert.False(t, res.Killed, "Kill after the exit marked the result killed")
				assert.False(t, res.Aborted)
				assert.Equal(t, 4, res.ExitCode)
				assert.Empty(t, res.Signal)
				if t.Failed() {
					return
				}
			}
		})
	}
}
