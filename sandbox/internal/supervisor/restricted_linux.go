//go:build linux

package supervisor

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// restrictedThread is the OS thread on which the supervisor performs what
// the kernel must judge as it would judge the command's own call: bind
// (bind_linux.go) and the metadata changes it emulates (metadata_linux.go).
// The thread is restricted like the command before its first call —
// unshare(CLONE_FS) (its own umask and working directory), no_new_privs, the
// command's Landlock ruleset, no capabilities — and it is never given back to
// the Go runtime: its goroutine stays locked to it and ends with the
// notifier, and the runtime then terminates the thread (nor does the runtime
// clone new threads from a locked one, so nothing inherits its
// restrictions). It serves one call at a time; the notification loop, which
// makes the calls, waits for each.
//
// Every restriction is irreversible, which is why the same thread can serve
// the whole run: a call cannot undo what an earlier one set up. Only the
// umask and the working directory change per call, and only for a call that
// asks for them.
type restrictedThread struct {
	// ruleset is the command's Landlock ruleset (-1: none); read by the
	// thread once, when it starts, while the notifier still holds it.
	ruleset int
	// sharedFS keeps the thread in the process's filesystem context, as
	// on a host that refuses unshare(CLONE_FS) (tests).
	sharedFS bool
	mu       sync.Mutex // held for each call
	calls    chan restrictedCall
	stopped  bool
}

// restrictedCall is one call on the thread.
type restrictedCall struct {
	// fs: the call needs the thread's own umask and working directory
	// (umask, and dirfd when not -1, are set first).
	fs bool
	// orShared: without a filesystem context of its own, run fn all the
	// same, told so (private false), rather than fail with EACCES.
	orShared bool
	umask    int
	dirfd    int
	fn       func(private bool) error
	done     chan error
}

// do runs fn on the restricted thread and returns its error. With fs, the
// thread's umask is umask and, when dirfd is not -1, its working directory
// dirfd while fn runs; a host that refuses unshare(CLONE_FS) then fails the
// call with EACCES (the thread shares the process's, which it must not
// change). A thread that could not be restricted fails every call with
// EACCES.
func (r *restrictedThread) do(fs bool, umask, dirfd int, fn func() error) error {
	return r.call(restrictedCall{fs: fs, umask: umask, dirfd: dirfd, fn: func(bool) error { return fn() }})
}

// doFS runs fn on the restricted thread with umask and dirfd (when not
// -1) as its umask and working directory, private true, where the thread
// has a filesystem context of its own. On a host that refuses
// unshare(CLONE_FS) (Docker's default seccomp profile) fn runs with
// neither, private false: it must name dirfd itself (/proc/self/fd) and
// apply the umask itself.
func (r *restrictedThread) doFS(umask, dirfd int, fn func(private bool) error) error {
	return r.call(restrictedCall{fs: true, orShared: true, umask: umask, dirfd: dirfd, fn: fn})
}

func (r *restrictedThread) call(c restrictedCall) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return unix.EACCES
	}
	if r.calls == nil {
		r.calls = make(chan restrictedCall)
		ready := make(chan struct{})
		go r.serve(ready)
		<-ready
	}
	c.done = make(chan error, 1)
	r.calls <- c
	return <-c.done
}

// stop ends the thread, if it was started; later calls fail with EACCES.
func (r *restrictedThread) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.calls != nil {
		close(r.calls)
		r.calls = nil
	}
}

// serve restricts the calling goroutine's thread and runs the calls on it.
func (r *restrictedThread) serve(ready chan<- struct{}) {
	runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
	privateFS, err := r.restrict()
	close(ready)
	for c := range r.calls {
		switch {
		case err != nil:
			c.done <- err
		case c.fs && !privateFS && !c.orShared:
			c.done <- unix.EACCES
		case c.fs && privateFS:
			unix.Umask(c.umask)
			if c.dirfd >= 0 {
				if e := unix.Fchdir(c.dirfd); e != nil {
					c.done <- e
					continue
				}
			}
			c.done <- c.fn(true)
			unix.Chdir("/") // hold no directory of the sandbox between calls
		default:
			c.done <- c.fn(false)
		}
	}
}

// restrict restricts the current thread like the command. privateFS
// reports whether it got a filesystem context of its own; err is EACCES
// when a restriction failed (the thread must then not be used).
func (r *restrictedThread) restrict() (privateFS bool, err error) {
	privateFS = !r.sharedFS && unix.Unshare(unix.CLONE_FS) == nil
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return privateFS, unix.EACCES
	}
	if r.ruleset >= 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.ruleset), 0, 0); e != 0 {
			return privateFS, unix.EACCES
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return privateFS, unix.EACCES
	}
	return privateFS, nil
}
