//go:build linux

package runner

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// controlPair is a control socket's two ends, closed when t ends (closing
// one twice does no harm).
func controlPair(t *testing.T) (supervisor, runner *os.File) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	supervisor, runner = os.NewFile(uintptr(pair[0]), "supervisor"), os.NewFile(uintptr(pair[1]), "runner")
	t.Cleanup(func() {
		supervisor.Close()
		runner.Close()
	})
	return supervisor, runner
}

// TestRecvMsgAfterReset: a runner that fails before reading the whole spec
// sends its fail message and ends with the supervisor's next message
// unread. The kernel then reports ECONNRESET once, ahead of the fail
// message: RecvMsg must still return that message, then ErrClosed.
func TestRecvMsgAfterReset(t *testing.T) {
	sup, run := controlPair(t)
	if err := SendMsg(run, Msg{Kind: MsgFail, Detail: "userns-map: uid_map: Operation not permitted"}, -1); err != nil {
		t.Fatal(err)
	}
	if err := SendBytes(sup, []byte("the spec's second part"), nil); err != nil {
		t.Fatal(err)
	}
	run.Close() // with the spec unread
	var m Msg
	if _, err := RecvMsg(sup, &m); err != nil {
		t.Fatalf("RecvMsg: %v, want the runner's fail message", err)
	}
	if m.Kind != MsgFail || m.Detail != "userns-map: uid_map: Operation not permitted" {
		t.Fatalf("RecvMsg: %+v, want the runner's fail message", m)
	}
	if _, err := RecvMsg(sup, &m); !errors.Is(err, ErrClosed) {
		t.Fatalf("RecvMsg after the last message: %v, want ErrClosed", err)
	}
}

// TestRecvMsgDroppedDescriptor: a descriptor the runner sends that the
// kernel cannot install here (no descriptor left under RLIMIT_NOFILE) is
// dropped with MSG_CTRUNC; RecvMsg says so with EMFILE, which the
// supervisor reports as running out of resources, never as a message that
// came without its descriptor.
func TestRecvMsgDroppedDescriptor(t *testing.T) {
	sup, run := controlPair(t)
	if err := SendMsg(run, Msg{Kind: MsgListener}, int(run.Fd())); err != nil {
		t.Fatal(err)
	}
	// The next free descriptor is the limit: none can be installed.
	probe, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(probe)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(probe)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var m Msg
	fd, err := RecvMsg(sup, &m)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	if !errors.Is(err, unix.EMFILE) {
		t.Fatalf("RecvMsg with no descriptor left: fd %d, %v, want EMFILE", fd, err)
	}
}
