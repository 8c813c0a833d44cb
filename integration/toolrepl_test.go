//go:build linux

package integration

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

var (
	toolreplBin string // examples/toolrepl
	toolreplErr error  // why it could not be built
)

// TestToolLayerEscalation drives the model-facing tool layer (the example
// harness, as root and as the unprivileged user): a write denied in
// read-only, reported with the denial marker and the escalation hint; the
// same command retried with sandbox_permissions, approved on a prompt that
// shows the command, the mode change and the denial it follows, lands; the session's next call is back in read-only; a rejected
// escalation runs nothing.
func TestToolLayerEscalation(t *testing.T) {
	if toolreplErr != nil {
		t.Fatalf("examples/toolrepl did not build: %v", toolreplErr)
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		requireLandlock(t)
		ws := id.workspace(t)
		n := nonce()
		script := strings.Join([]string{
			`bash {"command":"echo a > a-` + n + `","description":"Write a file"}`,
			`bash {"command":"echo a > a-` + n + `","description":"Write a file","sandbox_permissions":"workspace-write","justification":"The file is the deliverable."}`,
			`y`,
			`bash {"command":"echo b > b-` + n + `","description":"Write another file"}`,
			`bash {"command":"echo c > c-` + n + `","description":"Write a third file","sandbox_permissions":"workspace-write","justification":"Needed too."}`,
			`n`,
			`:quit`,
		}, "\n") + "\n"
		cmd := exec.Command(toolreplBin, "--mode", "read-only", "--workspace", ws, "--session", "it")
		cmd.Dir = ws
		cmd.Env = id.env()
		cmd.SysProcAttr = id.sysProcAttr()
		cmd.Stdin = strings.NewReader(script)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = testtime.Scale(5 * time.Second)
		if err := cmd.Run(); err != nil {
			t.Fatalf("toolrepl: %v\n%s", err, out.String())
		}
		got := out.String()
		for _, want := range []string{
			"[sandbox: file access denied under read-only mode]\n[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]\n[exit code: 1]",
			"approval: session it, bash call call-2 asks to run\n  command:   echo a > a-" + n + "\n  about:     Write a file\n",
			"\n  mode:      read-only -> workspace-write\n  because:   The file is the deliverable.\n  last run:  denied write ",
			"/a-" + n + " (read-only mode); allow with --mode workspace-write\nallow once? [y/n] ",
			"approval: session it, bash call call-4 asks to run\n  command:   echo c > c-" + n + "\n",
			"Error: the user rejected escalating this command to \"workspace-write\"",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if strings.Count(got, "[sandbox: file access denied under read-only mode]") != 2 {
			t.Errorf("want two denials (first call, and the session's next call back in read-only):\n%s", got)
		}
		if !exists(filepath.Join(ws, "a-"+n)) {
			t.Errorf("the approved retry did not write a-%s:\n%s", n, got)
		}
		for _, f := range []string{"b-" + n, "c-" + n} {
			if exists(filepath.Join(ws, f)) {
				t.Errorf("%s exists: a read-only call wrote it", f)
			}
		}
	})
}
