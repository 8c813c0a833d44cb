package mcpserver

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
)

// DefaultProgressInterval is how often a tools/call that asked for
// progress (a progress token in its _meta) gets notifications/progress
// while its command runs.
const DefaultProgressInterval = 5 * time.Second

// maxProgressLine bounds a progress message: the end of the output's last
// line.
const maxProgressLine = 200

// progress keeps the end of a running command's output and reports its
// last line every interval. Its write never blocks on the client: the
// notifications go out from a goroutine of their own.
type progress struct {
	mu   sync.Mutex
	tail []byte // the output's last bytes
}

// write records p (call.Context.Output).
func (p *progress) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail = append(p.tail, b...)
	if n := len(p.tail); n > 4*maxProgressLine {
		p.tail = append(p.tail[:0], p.tail[n-2*maxProgressLine:]...)
	}
}

// lastLine is the output's last non-empty line, its end at most
// maxProgressLine bytes, escaped for display.
func (p *progress) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := bytes.TrimRight(p.tail, "\r\n")
	if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
		t = t[i+1:]
	}
	if len(t) > maxProgressLine {
		t = t[len(t)-maxProgressLine:]
	}
	return printable.Text(string(bytes.TrimRight(t, "\r")))
}

// report sends ss a progress notification for token every interval until
// the returned stop is called (which waits for the last one).
func (p *progress) report(ctx context.Context, ss *mcp.ServerSession, token any, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			msg := p.lastLine()
			if msg == "" {
				msg = "running"
			}
			// A client that went away ends the reports, not the command.
			if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg}); err != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}
