package facts

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Denial is one fact the supervisor observed: the sandbox refused Op on Path
// (a filesystem path or pathname unix socket) or Address (an address family,
// an abstract unix socket "@name", or a terminal ioctl), Count times.
type Denial struct {
	Op      string `json:"op"`
	Path    string `json:"path,omitempty"`
	Address string `json:"address,omitempty"`
	Syscall string `json:"syscall"`
	Errno   string `json:"errno"`
	Count   int    `json:"count"`
	// Reason says why, where the op and target alone do not (a
	// destination of a network allowlist: "not in the allowlist").
	Reason string `json:"reason,omitempty"`
	// Suggest says how to allow it, or why no confined mode does (see
	// Suggest); set when the command's facts are assembled.
	Suggest *Suggestion `json:"suggest,omitempty"`
}

// OpLimit is the op of a resource-limit fact: Address names the limit
// ("memory", "pids"), Syscall what the kernel did ("oom-kill", "fork"),
// Errno what the command saw ("SIGKILL", "EAGAIN"), Count how often.
const OpLimit = "limit"

// SyscallProxy is the Syscall of a denial the egress proxy made.
const SyscallProxy = "proxy"

// OpResolve and SyscallDNS name a denial of the stub resolver: a name the
// allowlist refuses, looked up.
const (
	OpResolve  = "resolve"
	SyscallDNS = "dns"
)

// Network reports whether the denial is of network access: a socket of a
// network family, an inet connect, send or bind, a destination the egress
// proxy refused, a name the stub resolver did. Unix sockets (a path or an
// abstract "@name") are local IPC, not network.
func (d Denial) Network() bool {
	switch d.Op {
	case "socket", "listen", OpResolve: // listen is judged on inet sockets only
		return true
	case "connect", "send", "bind":
		if d.Syscall == SyscallProxy {
			return true
		}
		_, err := netip.ParseAddrPort(d.Address)
		return err == nil
	}
	return false
}

// Target is the path or address, or the system call when it adds
// information the op does not.
func (d Denial) Target() string {
	switch {
	case d.Path != "":
		return d.Path
	case d.Address != "":
		return d.Address
	case d.Syscall != d.Op:
		return d.Syscall
	}
	return ""
}

// Line renders the denial as dsh-sandbox-run prints it (without the
// "dsh-sandbox-run: " prefix): "denied <op> <target> (<mode> mode)", or for
// a limit "limit <name> hit: <syscall> <errno> (<mode> mode)"; then, when
// the denial has a suggestion, "; " and its text ("allow with --allow-write
// /srv", or why no confined mode allows it).
func (d Denial) Line(m modes.Mode) string {
	if d.Op == OpLimit {
		line := fmt.Sprintf("limit %s hit: %s %s (%s mode)", printable.Name(d.Address), d.Syscall, d.Errno, m)
		if d.Suggest != nil {
			line += "; " + d.Suggest.Text()
		}
		return line
	}
	why := m.String() + " mode"
	if d.Reason != "" {
		why += ", " + printable.Name(d.Reason)
	}
	line := fmt.Sprintf("denied %s (%s)", d.Op, why)
	if t := d.Target(); t != "" {
		line = fmt.Sprintf("denied %s %s (%s)", d.Op, printable.Name(t), why)
	}
	if d.Suggest != nil {
		line += "; " + printable.Name(d.Suggest.Text())
	}
	return line
}

// MaxDenials is how many distinct denials (op, path, address) a command's
// facts keep; the denied calls beyond them are only counted
// (sandbox.Result.DenialsDropped), so a command denied on millions of distinct paths
// cannot grow the supervisor's memory or the report without bound.
const MaxDenials = 1000

// Log aggregates denials by (op, path, address), keeping first-seen
// order and at most MaxDenials distinct ones.
type Log struct {
	mu      sync.Mutex
	order   []string
	byKey   map[string]*Denial
	dropped int
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{byKey: map[string]*Denial{}} }

// Add records one denied call.
func (l *Log) Add(d Denial) { l.AddN(d, 1) }

// AddN records n denied calls of one kind (a limit hit n times).
func (l *Log) AddN(d Denial, n int) {
	if n <= 0 {
		return
	}
	key := d.Op + "\x00" + d.Path + "\x00" + d.Address
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byKey[key]; ok {
		e.Count += n
		return
	}
	if len(l.order) >= MaxDenials {
		l.dropped += n
		return
	}
	d.Count = n
	l.byKey[key] = &d
	l.order = append(l.order, key)
}

// List returns the kept denials in first-seen order.
func (l *Log) List() []Denial {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Denial, 0, len(l.order))
	for _, k := range l.order {
		out = append(out, *l.byKey[k])
	}
	return out
}

// Dropped is how many denied calls were not kept: each was a new
// distinct denial after MaxDenials of them.
func (l *Log) Dropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}
