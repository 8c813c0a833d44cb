//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestReadsHost: the commands of shmctl, semctl and msgctl that read the
// host's objects by index or sum them up, by each call's own numbers; the
// others act on one object, by id (semctl's GETALL, GETNCNT and GETZCNT
// share SHM_STAT's numbers and must not be refused; SEM_INFO and MSG_INFO
// ignore the id and must be).
func TestReadsHost(t *testing.T) {
	const ipcInfo = 3 // IPC_INFO (not in x/sys/unix)
	for _, tc := range []struct {
		what string
		k    ipcKind
		cmd  int
		want bool
	}{
		{"shm IPC_RMID", ipcShm, unix.IPC_RMID, false},
		{"shm IPC_SET", ipcShm, unix.IPC_SET, false},
		{"shm IPC_STAT", ipcShm, unix.IPC_STAT, false},
		{"shm IPC_INFO", ipcShm, ipcInfo, true},
		{"shm 4", ipcShm, 4, false},
		{"SHM_LOCK", ipcShm, 11, false},
		{"SHM_UNLOCK", ipcShm, 12, false},
		{"SHM_STAT", ipcShm, 13, true},
		{"SHM_INFO", ipcShm, 14, true},
		{"SHM_STAT_ANY", ipcShm, 15, true},
		{"shm 16", ipcShm, 16, false},
		{"shm -1", ipcShm, -1, false},
		{"sem IPC_INFO", ipcSem, ipcInfo, true},
		{"GETPID", ipcSem, 11, false},
		{"GETVAL", ipcSem, 12, false},
		{"GETALL", ipcSem, 13, false},
		{"GETNCNT", ipcSem, 14, false},
		{"GETZCNT", ipcSem, 15, false},
		{"SETVAL", ipcSem, 16, false},
		{"SETALL", ipcSem, 17, false},
		{"SEM_STAT", ipcSem, 18, true},
		{"SEM_INFO", ipcSem, 19, true},
		{"SEM_STAT_ANY", ipcSem, 20, true},
		{"sem 21", ipcSem, 21, false},
		{"msg IPC_INFO", ipcMsg, ipcInfo, true},
		{"msg IPC_STAT", ipcMsg, unix.IPC_STAT, false},
		{"msg 10", ipcMsg, 10, false},
		{"MSG_STAT", ipcMsg, 11, true},
		{"MSG_INFO", ipcMsg, 12, true},
		{"MSG_STAT_ANY", ipcMsg, 13, true},
		{"msg 14", ipcMsg, 14, false},
	} {
		assert.Equal(t, tc.want, readsHost(tc.k, tc.cmd), tc.what)
	}
}

// TestIPCObjects: ids are recorded per kind, and forgotten.
func TestIPCObjects(t *testing.T) {
	assert.Equal(t, []string{"shm", "sem", "msg"}, []string{ipcShm.String(), ipcSem.String(), ipcMsg.String()})
	var o ipcObjects
	assert.False(t, o.has(ipcShm, 0), "empty")
	o.forget(ipcMsg, 1) // nothing to forget: no panic
	o.add(ipcShm, 0)
	o.add(ipcSem, 32768)
	for _, tc := range []struct {
		k    ipcKind
		id   int
		want bool
	}{
		{ipcShm, 0, true},
		{ipcSem, 0, false},
		{ipcMsg, 0, false},
		{ipcSem, 32768, true},
		{ipcShm, 32768, false},
		{ipcSem, 32769, false},
		{ipcSem, -32768, false},
	} {
		assert.Equal(t, tc.want, o.has(tc.k, tc.id), "%s %d", tc.k, tc.id)
	}
	o.forget(ipcShm, 0)
	assert.False(t, o.has(ipcShm, 0), "forgotten")
	assert.True(t, o.has(ipcSem, 32768), "another kind's id stays")
}

// TestErrnoErr: a raw syscall's errno as an error, nil for 0.
func TestErrnoErr(t *testing.T) {
	assert.NoError(t, errnoErr(0))
	assert.Equal(t, unix.EEXIST, errnoErr(unix.EEXIST))
	assert.ErrorIs(t, errnoErr(unix.ENOSPC), unix.ENOSPC)
}

// TestIPCVerdictByID: without an IPC namespace, a call on an id reaches
// only the objects the sandbox made (by kind; the id is an int), others get
// EINVAL and a fact; the listing commands EACCES (IPC_64 aside); IPC_RMID
// forgets an id; POSIX queues are refused. The calls run in order on one
// notifier. (shmget, semget and msgget are performed, not judged: not here.)
func TestIPCVerdictByID(t *testing.T) {
	n := &Notifier{ipc: &ipcObjects{}}
	n.ipc.add(ipcShm, 5)
	n.ipc.add(ipcSem, 7)
	n.ipc.add(ipcMsg, 9)
	const ipc64, ipcInfo = 0x100, 3
	notOurs := func(name, addr string) verdict {
		return verdict{errno: unix.EINVAL, fact: &facts.Denial{Op: "ipc", Address: addr, Syscall: name, Errno: "EINVAL", Reason: "not an IPC object of the sandbox's"}}
	}
	listing := func(name, addr string) verdict {
		return verdict{errno: unix.EACCES, fact: &facts.Denial{Op: "ipc", Address: addr, Syscall: name, Errno: "EACCES", Reason: "lists the host's IPC objects"}}
	}
	mqueue := func(name string) verdict {
		return verdict{errno: unix.EACCES, fact: &facts.Denial{Op: "ipc", Address: "mqueue", Syscall: name, Errno: "EACCES", Reason: "POSIX message queues are the host's here (no IPC namespace)"}}
	}
	for i, tc := range []struct {
		name string
		a    [6]uint64
		want verdict
	}{
		{"shmat", [6]uint64{5}, allow()},
		{"shmat", [6]uint64{6}, notOurs("shmat", "shm 6")},
		{"shmat", [6]uint64{1<<32 | 5}, allow()},
		{"shmat", [6]uint64{^uint64(0)}, notOurs("shmat", "shm -1")},
		{"shmat", [6]uint64{7}, notOurs("shmat", "shm 7")}, // a semaphore's id
		{"semop", [6]uint64{7}, allow()},
		{"semtimedop", [6]uint64{7}, allow()},
		{"semop", [6]uint64{5}, notOurs("semop", "sem 5")},
		{"msgsnd", [6]uint64{9}, allow()},
		{"msgrcv", [6]uint64{10}, notOurs("msgrcv", "msg 10")},
		{"shmctl", [6]uint64{5, unix.IPC_STAT}, allow()},
		{"shmctl", [6]uint64{5, ipc64 | unix.IPC_STAT}, allow()},
		{"shmctl", [6]uint64{5, ipcInfo}, listing("shmctl", "shm listing")},
		{"shmctl", [6]uint64{5, 13}, listing("shmctl", "shm listing")},
		{"shmctl", [6]uint64{5, ipc64 | 14}, listing("shmctl", "shm listing")},
		{"shmctl", [6]uint64{6, unix.IPC_STAT}, notOurs("shmctl", "shm 6")},
		{"shmctl", [6]uint64{6, unix.IPC_RMID}, notOurs("shmctl", "shm 6")},
		{"msgctl", [6]uint64{9, ipcInfo}, listing("msgctl", "msg listing")},
		{"semctl", [6]uint64{7, ipcInfo, unix.IPC_STAT}, allow()}, // the command is a[2]
		{"semctl", [6]uint64{7, 0, ipcInfo}, listing("semctl", "sem listing")},
		{"semctl", [6]uint64{7, 0, unix.IPC_RMID}, allow()},
		{"semop", [6]uint64{7}, notOurs("semop", "sem 7")}, // removed: forgotten
		{"msgctl", [6]uint64{9, ipc64 | unix.IPC_RMID}, allow()},
		{"msgsnd", [6]uint64{9}, notOurs("msgsnd", "msg 9")},
		{"shmat", [6]uint64{5}, allow()}, // another kind's removal forgets nothing
		{"mq_open", [6]uint64{0x1000, unix.O_CREAT}, mqueue("mq_open")},
		{"mq_unlink", [6]uint64{0x1000}, mqueue("mq_unlink")},
	} {
		assert.Equal(t, tc.want, n.ipcVerdict(&seccomp.Notif{Args: tc.a}, seccomp.Rule{Name: tc.name, Op: "ipc"}), "%d: %s %v", i, tc.name, tc.a)
	}
	// With an IPC namespace of its own every call continues.
	own := &Notifier{}
	for _, name := range []string{"shmat", "semop", "msgctl", "mq_open"} {
		assert.Equal(t, allow(), own.ipcVerdict(&seccomp.Notif{Args: [6]uint64{6, ipcInfo, ipcInfo}}, seccomp.Rule{Name: name, Op: "ipc"}), name)
	}
}
