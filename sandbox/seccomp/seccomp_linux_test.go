package seccomp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestTable(t *testing.T) {
	off, err := Table(Spec{Network: false, Notify: true})
	require.NoError(t, err)
	on, err := Table(Spec{Network: true, Notify: true})
	require.NoError(t, err)

	byName := func(tab map[int32]Rule) map[string]Rule {
		m := map[string]Rule{}
		for _, r := range tab {
			m[r.Name] = r
		}
		return m
	}
	o, n := byName(off), byName(on)
	for _, tc := range []struct {
		name string
		kind Kind
		op   string
	}{
		{"openat", KindPath, "write"}, {"unlinkat", KindPath, "remove"}, {"renameat2", KindPath, "rename"},
		{"linkat", KindPath, "link"}, {"truncate", KindPath, "truncate"}, {"ptrace", KindDeny, "ptrace"},
		{"mount", KindDeny, "mount"}, {"unshare", KindDeny, "namespace"}, {"keyctl", KindDeny, "keyring"},
		{"bpf", KindDeny, "bpf"}, {"clone", KindDeny, "namespace"}, {"ioctl", KindDeny, "ioctl"},
		{"socket", KindSocket, "socket"}, {"connect", KindConnect, "connect"}, {"sendto", KindSendto, "send"},
		{"sendmsg", KindSendmsg, "send"}, {"sendmmsg", KindSendmsg, "send"},
	} {
		r, ok := o[tc.name]
		if assert.True(t, ok, tc.name) {
			assert.Equal(t, tc.kind, r.Kind, tc.name)
			assert.Equal(t, tc.op, r.Op, tc.name)
			assert.NotZero(t, r.Errno, tc.name)
		}
	}
	_, ok := n["socket"]
	assert.False(t, ok, "network on: socket is not notified")
	_, ok = n["connect"]
	assert.False(t, ok, "network on: connect is not notified")
	_, ok = n["sendto"]
	assert.False(t, ok, "network on: sendto is not notified")
	assert.Equal(t, unix.EACCES, o["openat"].Errno, "path denials use Landlock's errno")
}

// TestTableSignals: signal calls are routed only when Spec.Signals (with
// Notify), as KindSignal with the pid argument named.
func TestTableSignals(t *testing.T) {
	calls := map[string]int{"kill": 0, "tkill": 0, "tgkill": 0, "rt_sigqueueinfo": 0, "rt_tgsigqueueinfo": 0, "pidfd_send_signal": 0}
	for _, s := range []Spec{{Notify: true}, {Notify: true, Network: true}, {Notify: true, Signals: true}, {Notify: true, Signals: true, Network: true}} {
		tab, err := Table(s)
		require.NoError(t, err)
		seen := map[string]Rule{}
		for _, r := range tab {
			if _, ok := calls[r.Name]; ok {
				seen[r.Name] = r
			}
		}
		if !s.Signals {
			assert.Empty(t, seen, "%+v", s)
			continue
		}
		assert.Len(t, seen, len(calls), "%+v", s)
		for name, arg := range calls {
			assert.Equal(t, KindSignal, seen[name].Kind, name)
			assert.Equal(t, "signal", seen[name].Op, name)
			assert.Equal(t, unix.EPERM, seen[name].Errno, name)
			assert.Equal(t, arg, seen[name].PidArg, name)
		}
	}
	a, err := Program(Spec{Notify: true})
	require.NoError(t, err)
	b, err := Program(Spec{Notify: true, Signals: true})
	require.NoError(t, err)
	assert.Greater(t, len(b), len(a), "the Signals variant has more rules")
	_, err = Program(Spec{Signals: true})
	assert.Error(t, err, "Signals without Notify: nothing could judge them")
}

func TestBuildVariants(t *testing.T) {
	for _, s := range []Spec{{}, {Network: true}, {Notify: true}, {Network: true, Notify: true}, {Notify: true, Signals: true}, {Network: true, Notify: true, Signals: true},
		{Notify: true, Metadata: true}, {Network: true, Notify: true, Signals: true, Metadata: true}} {
		f, err := build(s)
		require.NoError(t, err, "%+v", s)
		f.Release()
	}
}

func TestSupported(t *testing.T) {
	assert.True(t, Supported(), "seccomp is required on every machine this project runs on")
}
