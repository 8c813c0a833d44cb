//go:build linux

package runner

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRecvMsgAfterReset: a runner that fails before reading the whole spec
// sends its fail message and ends with the supervisor's next message
// unread. The kernel then reports ECONNRESET once, ahead of the fail
// message: RecvMsg must still return that message, then ErrClosed.
func TestRecvMsgAfterReset(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sup := os.NewFile(uintptr(pair[0]), "supervisor")
	defer sup.Close()
	run := os.NewFile(uintptr(pair[1]), "runner")
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
