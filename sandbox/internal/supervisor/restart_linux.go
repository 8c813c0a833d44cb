//go:build linux

package supervisor

import (
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// A signal that arrives while the supervisor performs a notified call ends
// the notification — the answer then fails with ENOENT — and a handler
// installed with SA_RESTART (every Go program's, for the scheduler's
// preemption signal) restarts the call: a new notification for a call
// whose effect already took place. A bind would then find its socket bound
// and fail with EINVAL, though it was the command's own first call that
// bound it (Go's net.Listen, measured on Linux 6.1 under TCG). So a bind
// whose answer was lost is remembered — the thread, the descriptor, the
// socket's inode and the address — and the restarted call on that very
// socket with the same address gets the success the first one had.
// (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV would keep such signals out, but
// then a signal could not interrupt a long emulated call either:
// bounded_linux.go.)

// lostBind is a bind the supervisor performed whose answer was lost.
type lostBind struct {
	tid, fd int
	ino     uint64 // the socket's inode
	addr    string // the address the command gave
}

// maxLostBinds bounds the record: an entry lives until the thread's next
// bind on that descriptor, and a thread that exits leaves its entry.
const maxLostBinds = 256

// lostBinds records lost binds by thread and descriptor.
type lostBinds struct {
	mu sync.Mutex
	m  map[[2]int]lostBind
}

func (l *lostBinds) add(b lostBind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLostBinds {
		l.m = map[[2]int]lostBind{}
	}
	l.m[[2]int{b.tid, b.fd}] = b
}

// take removes the record of thread tid's descriptor fd and returns it.
func (l *lostBinds) take(tid, fd int) (lostBind, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]int{tid, fd}
	b, ok := l.m[k]
	delete(l.m, k)
	return b, ok
}

// rebound reports whether the bind of req (descriptor fd, address addr)
// restarts one whose answer was lost — the same thread, descriptor, socket
// and address, the notification still pending — and then its success.
func (n *Notifier) rebound(req *seccomp.Notif, fd int, addr []byte) (verdict, bool) {
	tid := int(req.Pid)
	b, ok := n.lost.take(tid, fd)
	if !ok {
		return verdict{}, false
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(tid)+"/fd/"+strconv.Itoa(fd), &st); err != nil {
		return verdict{}, false
	}
	if b.ino != st.Ino || b.addr != string(addr) || !seccomp.Valid(n.fd, req.ID) {
		return verdict{}, false
	}
	return verdict{lost: &b}, true
}

// bound is the record of the bind of req just performed on the command's
// descriptor fd (the address it gave, addr), kept should its answer be lost.
func (n *Notifier) bound(req *seccomp.Notif, fd int, addr []byte) *lostBind {
	tid := int(req.Pid)
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(tid)+"/fd/"+strconv.Itoa(fd), &st); err != nil {
		return nil
	}
	return &lostBind{tid: tid, fd: fd, ino: st.Ino, addr: string(addr)}
}
