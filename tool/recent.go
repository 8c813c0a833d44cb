package tool

import (
	"sync"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// maxRecentSessions bounds how many sessions' last denied call the tool
// remembers; past it the oldest entry goes.
const maxRecentSessions = 256

// deniedCall is a session's last foreground call that the sandbox denied.
type deniedCall struct {
	command string
	denials []sandbox.Denial
}

// recentDenials remembers, per session, the last denied foreground call, so
// an escalation that retries the same command can show the user what was
// denied. It holds at most maxRecentSessions entries.
type recentDenials struct {
	mu    sync.Mutex
	calls map[string]deniedCall
	order []string // sessions, oldest first
}

// record notes the outcome of a session's foreground call: a denied call
// replaces the session's entry, any other call clears it (the next
// escalation does not follow a denial).
func (r *recentDenials) record(session, command string, f sandbox.Facts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	denials := deniedFacts(f)
	if len(denials) == 0 {
		r.forgetLocked(session)
		return
	}
	if r.calls == nil {
		r.calls = make(map[string]deniedCall)
	}
	if _, ok := r.calls[session]; !ok {
		if len(r.order) == maxRecentSessions {
			delete(r.calls, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, session)
	}
	r.calls[session] = deniedCall{command: command, denials: denials}
}

// take returns and forgets the denials of the session's last call when it
// was command.
func (r *recentDenials) take(session, command string) []sandbox.Denial {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.calls[session]
	if !ok || c.command != command {
		return nil
	}
	r.forgetLocked(session)
	return c.denials
}

func (r *recentDenials) forgetLocked(session string) {
	if _, ok := r.calls[session]; !ok {
		return
	}
	delete(r.calls, session)
	for i, s := range r.order {
		if s == session {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}

// deniedFacts are the denials of a denied result (resource limits left
// out), copied.
func deniedFacts(f sandbox.Facts) []sandbox.Denial {
	if !f.Denied {
		return nil
	}
	var out []sandbox.Denial
	for _, d := range f.Denials {
		if d.Op != sandbox.OpLimit {
			out = append(out, d)
		}
	}
	return out
}
