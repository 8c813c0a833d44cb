//go:build linux

package supervisor

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Without an IPC namespace of its own (no user namespaces: Docker's profile,
// Ubuntu 24.04's AppArmor restriction, a nested sandbox) the command shares
// the host's System V IPC objects and POSIX message queues: it could attach
// a host process's shared memory segment and write into it, take its
// semaphores, read or inject its messages. So every IPC call is routed, and
// without a namespace the supervisor judges it by the object's id — a
// register, nothing the command can change after the check — letting a call
// reach only the objects the sandbox itself made during this run:
//
//   - shmget, semget, msgget with IPC_PRIVATE, or with a key that names no
//     object yet and IPC_CREAT: performed by the supervisor (the same
//     identity, the same IPC namespace: the host's), their ids recorded;
//     with a key of an object the sandbox did not make: EACCES and a fact;
//   - shmat, shmctl, semop, semtimedop, semctl, msgsnd, msgrcv, msgctl on a
//     recorded id: continued (an IPC_RMID forgets it, so a later host object
//     with the same id is not the sandbox's); on any other id, EINVAL (the
//     kernel's answer for an id that is not there) and a fact;
//   - the *_STAT, *_STAT_ANY and *_INFO commands, which read the host's
//     objects by index: EACCES and a fact;
//   - mq_open and mq_unlink (a name, in memory, in the host's queue
//     namespace): EACCES and a fact — no tool an agent runs needs them.
//
// With an IPC namespace of its own every call continues at once.

// ipcKind is a class of System V IPC object.
type ipcKind int

const (
	ipcShm ipcKind = iota
	ipcSem
	ipcMsg
)

func (k ipcKind) String() string { return [...]string{"shm", "sem", "msg"}[k] }

// ipcObjects are the ids of the System V IPC objects the sandbox made.
type ipcObjects struct {
	mu  sync.Mutex
	ids [3]map[int]struct{}
}

func (o *ipcObjects) add(k ipcKind, id int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids[k] == nil {
		o.ids[k] = map[int]struct{}{}
	}
	o.ids[k][id] = struct{}{}
}

func (o *ipcObjects) has(k ipcKind, id int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.ids[k][id]
	return ok
}

func (o *ipcObjects) forget(k ipcKind, id int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ids[k], id)
}

// SharesIPC makes the notifier judge IPC calls: the command has no IPC
// namespace of its own (the runner says so with the listener).
func (n *Notifier) SharesIPC() { n.ipc = &ipcObjects{} }

// readsHost reports a command of shmctl, semctl or msgctl (by kind) that
// reads the host's objects by index or sums them up: IPC_INFO (3) for
// each, and each call's own numbers (linux/shm.h, sem.h, msg.h) — SHM_STAT,
// SHM_INFO, SHM_STAT_ANY (13, 14, 15); SEM_STAT, SEM_INFO, SEM_STAT_ANY (18,
// 19, 20); MSG_STAT, MSG_INFO, MSG_STAT_ANY (11, 12, 13). The kernel ignores
// the id of these, so the id check cannot stand in for them.
func readsHost(k ipcKind, cmd int) bool {
	if cmd == 3 {
		return true
	}
	switch k {
	case ipcShm:
		return cmd >= 13 && cmd <= 15
	case ipcSem:
		return cmd >= 18 && cmd <= 20
	case ipcMsg:
		return cmd >= 11 && cmd <= 13
	}
	return false
}

// ipcVerdict answers an IPC call (seccomp.KindIPC).
func (n *Notifier) ipcVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	if n.ipc == nil {
		return allow()
	}
	a := req.Args
	denyID := func(k ipcKind, id uint64) (verdict, bool) {
		if n.ipc.has(k, int(int32(id))) {
			return verdict{}, false
		}
		v := n.deny(rule, unix.EINVAL, "", fmt.Sprintf("%s %d", k, int32(id)))
		v.fact.Reason = "not an IPC object of the sandbox's"
		return v, true
	}
	switch rule.Name {
	case "shmget", "semget", "msgget":
		return n.ipcGet(req, rule)
	case "shmat":
		if v, denied := denyID(ipcShm, a[0]); denied {
			return v
		}
	case "semop", "semtimedop":
		if v, denied := denyID(ipcSem, a[0]); denied {
			return v
		}
	case "msgsnd", "msgrcv":
		if v, denied := denyID(ipcMsg, a[0]); denied {
			return v
		}
	case "shmctl", "semctl", "msgctl":
		k, cmdArg := ipcShm, a[1]
		switch rule.Name {
		case "semctl":
			k, cmdArg = ipcSem, a[2]
		case "msgctl":
			k = ipcMsg
		}
		cmd := int(int32(cmdArg)) &^ 0x100 // IPC_64
		if readsHost(k, cmd) {
			v := n.deny(rule, unix.EACCES, "", fmt.Sprintf("%s listing", k))
			v.fact.Reason = "lists the host's IPC objects"
			return v
		}
		if v, denied := denyID(k, a[0]); denied {
			return v
		}
		if cmd == unix.IPC_RMID {
			n.ipc.forget(k, int(int32(a[0])))
		}
	default: // mq_open, mq_unlink
		v := n.deny(rule, unix.EACCES, "", "mqueue")
		v.fact.Reason = "POSIX message queues are the host's here (no IPC namespace)"
		return v
	}
	return allow()
}

// ipcGet performs shmget, semget or msgget for the command: a new object,
// or refused when the key names one the sandbox did not make.
func (n *Notifier) ipcGet(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	key := int(int32(a[0]))
	var k ipcKind
	var get func(flags int) (int, error)
	switch rule.Name {
	case "shmget":
		k = ipcShm
		get = func(flags int) (int, error) {
			id, _, e := unix.Syscall(unix.SYS_SHMGET, uintptr(key), uintptr(a[1]), uintptr(flags))
			return int(id), errnoErr(e)
		}
	case "semget":
		k = ipcSem
		get = func(flags int) (int, error) {
			id, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(key), uintptr(int32(a[1])), uintptr(flags))
			return int(id), errnoErr(e)
		}
	default:
		k = ipcMsg
		get = func(flags int) (int, error) {
			id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), uintptr(flags), 0)
			return int(id), errnoErr(e)
		}
	}
	// On the restricted thread: the command's identity without
	// capabilities, so the kernel's permission checks are the command's.
	direct := get
	get = func(flags int) (id int, err error) {
		if rerr := n.restricted.do(false, 0, -1, func() error {
			id, err = direct(flags)
			return nil
		}); rerr != nil {
			return -1, rerr
		}
		return id, err
	}
	flagArg := int(int32(a[2]))
	if rule.Name == "msgget" {
		flagArg = int(int32(a[1]))
	}
	if key != unix.IPC_PRIVATE {
		// An existing object: the sandbox's, or refused.
		id, err := get(flagArg &^ (unix.IPC_CREAT | unix.IPC_EXCL))
		if err == nil {
			if !n.ipc.has(k, id) {
				v := n.deny(rule, unix.EACCES, "", fmt.Sprintf("%s key %#x", k, uint32(key)))
				v.fact.Reason = "a host's IPC object"
				return v
			}
			if flagArg&(unix.IPC_CREAT|unix.IPC_EXCL) == unix.IPC_CREAT|unix.IPC_EXCL {
				return verdict{errno: unix.EEXIST}
			}
			return verdict{val: uint64(id)}
		}
		if flagArg&unix.IPC_CREAT == 0 {
			return errnoVerdict(err, 0)
		}
	}
	if !seccomp.Valid(n.fd, req.ID) {
		return verdict{abandon: true}
	}
	id, err := get(flagArg)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	n.ipc.add(k, id)
	return verdict{val: uint64(id)}
}

func errnoErr(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}
