//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hostIPC is a System V shared memory segment, semaphore set and message
// queue of the host's, with keys, open to every user (so that only the
// sandbox can keep a command out), the segment holding "host".
type hostIPC struct {
	key                 int
	shmid, semid, msqid int
}

func newHostIPC(t *testing.T) hostIPC {
	t.Helper()
	h := hostIPC{key: 0x5d500000 | int(unix.Getpid()&0xffff)}
	var err error
	h.shmid, err = unix.SysvShmGet(h.key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if err != nil {
		t.Fatalf("shmget: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(h.shmid, unix.IPC_RMID, nil) })
	mem, err := unix.SysvShmAttach(h.shmid, 0, 0)
	if err != nil {
		t.Fatalf("shmat: %v", err)
	}
	copy(mem, "host")
	if err := unix.SysvShmDetach(mem); err != nil {
		t.Fatalf("shmdt: %v", err)
	}
	id, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(h.key+1), 1, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if e != 0 {
		t.Fatalf("semget: %v", e)
	}
	h.semid = int(id)
	t.Cleanup(func() { unix.Syscall6(unix.SYS_SEMCTL, uintptr(h.semid), 0, unix.IPC_RMID, 0, 0, 0) })
	id, _, e = unix.Syscall(unix.SYS_MSGGET, uintptr(h.key+2), unix.IPC_CREAT|unix.IPC_EXCL|0o666, 0)
	if e != 0 {
		t.Fatalf("msgget: %v", e)
	}
	h.msqid = int(id)
	t.Cleanup(func() { unix.Syscall(unix.SYS_MSGCTL, uintptr(h.msqid), unix.IPC_RMID, 0) })
	return h
}

// intact checks that nothing reached the host's objects: the segment still
// reads "host", the semaphore is 0, the queue is empty.
func (h hostIPC) intact(t *testing.T) {
	t.Helper()
	mem, err := unix.SysvShmAttach(h.shmid, 0, unix.SHM_RDONLY)
	if err != nil {
		t.Errorf("the host's segment is gone: %v", err)
	} else {
		if got := string(mem[:5]); got != "host\x00" {
			t.Errorf("the host's segment was written: it holds %q, want %q", got, "host\x00")
		}
		unix.SysvShmDetach(mem)
	}
	v, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(h.semid), 0, 12 /* GETVAL */, 0, 0, 0)
	if e != 0 {
		t.Errorf("the host's semaphore set is gone: %v", e)
	}
	if v != 0 {
		t.Errorf("the host's semaphore was changed: %d, want 0", v)
	}
	var ds [128]byte // struct msqid_ds
	_, _, e = unix.Syscall(unix.SYS_MSGCTL, uintptr(h.msqid), unix.IPC_STAT, uintptr(unsafe.Pointer(&ds[0])))
	if e != 0 {
		t.Errorf("the host's queue is gone: %v", e)
	}
}

// ipcScript tries the host's objects by key and by id, its own private
// ones, the listing commands and POSIX message queues, printing each errno.
const ipcScript = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
key, shmid, semid, msqid = (int(a) for a in sys.argv[1:5])
def call(name, *args):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    print(name, os.strerror(ctypes.get_errno()) if r == -1 else "ok")
    return r
call("shmget-key", 29, key, 0, 0)
call("shmat-host", 30, shmid, 0, 0)
call("shmctl-rmid-host", 31, shmid, 0, 0)
call("shm-info", 31, 0, 14, 0)
buf = (ctypes.c_short * 3)(0, 1, 0)
call("semop-host", 65, semid, ctypes.addressof(buf), 1)
msg = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00evil", 12)
call("msgsnd-host", 69, msqid, ctypes.addressof(msg), 4, 0o4000)
own = libc.syscall(ctypes.c_long(29), ctypes.c_long(0), ctypes.c_long(4096), ctypes.c_long(0o1600))
print("own-shmget", "ok" if own >= 0 else os.strerror(ctypes.get_errno()))
libc.shmat.restype = ctypes.c_void_p
addr = libc.shmat(own, None, 0)
ctypes.memmove(addr, b"mine", 4)
print("own-shm", ctypes.string_at(addr, 4).decode())
call("own-shmctl-rmid", 31, own, 0, 0)
sem = libc.syscall(ctypes.c_long(64), ctypes.c_long(0), ctypes.c_long(2), ctypes.c_long(0o1600))
print("own-semget", "ok" if sem >= 0 else os.strerror(ctypes.get_errno()))
vals = (ctypes.c_ushort * 2)()
call("own-semctl-getall", 66, sem, 0, 13, ctypes.addressof(vals))
call("own-semctl-getncnt", 66, sem, 0, 14, 0)
info = ctypes.create_string_buffer(512)
call("sem-info", 66, sem, 0, 19, ctypes.addressof(info))
msq = libc.syscall(ctypes.c_long(68), ctypes.c_long(0), ctypes.c_long(0o1600))
print("own-msgget", "ok" if msq >= 0 else os.strerror(ctypes.get_errno()))
call("msg-info", 71, msq, 12, ctypes.addressof(info))
call("own-semctl-rmid", 66, sem, 0, 0, 0)
call("own-msgctl-rmid", 71, msq, 0, 0)
print("mq_open", "ok" if libc.mq_open(b"/dsh-it-q", 0o100 | 2, 0o600, None) >= 0 else os.strerror(ctypes.get_errno()))
`

// TestIPCIsolated: a command reaches no System V IPC object of the host's —
// by key or by a guessed id, to read, write, signal or remove it, nor lists
// them — and no POSIX message queue, whether it has an IPC namespace of its
// own or not (then the supervisor judges every id); its own private objects
// work. The host's objects are as they were.
func TestIPCIsolated(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, host hostConfig, id identity) {
		wrap := host.wrap()
		h := newHostIPC(t)
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws),
			Argv: []string{"python3", "-c", ipcScript, fmt.Sprint(h.key), fmt.Sprint(h.shmid), fmt.Sprint(h.semid), fmt.Sprint(h.msqid)},
			Dir:  ws})
		requireExit(t, r, 0)
		lines := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			k, v, _ := strings.Cut(l, " ")
			lines[k] = v
		}
		calls := []string{"shmget-key", "shmat-host", "shmctl-rmid-host", "shm-info", "semop-host", "msgsnd-host", "mq_open"}
		if rep := requireReport(t, r); contains(rep.Enforcement.Layers, "ipc-namespace") && !contains(rep.Enforcement.Layers, "landlock") {
			// Without Landlock (which refuses the queue's creation) a
			// command with an IPC namespace of its own makes a queue
			// there: its own, not the host's.
			calls = calls[:len(calls)-1]
		}
		for _, k := range calls {
			if lines[k] == "ok" {
				t.Errorf("%s reached the host's object: %s", k, r.String())
			}
		}
		for _, c := range []struct{ k, want string }{{"own-shmget", "ok"}, {"own-shm", "mine"}, {"own-shmctl-rmid", "ok"}} {
			if lines[c.k] != c.want {
				t.Errorf("%s: %q, want %q (%v)", c.k, lines[c.k], c.want, r)
			}
		}
		// Its own semaphore set and queue work, GETALL and GETNCNT
		// included (semctl numbers them as shmctl does its listings).
		for _, k := range []string{"own-semget", "own-semctl-getall", "own-semctl-getncnt", "own-msgget", "own-semctl-rmid", "own-msgctl-rmid"} {
			if lines[k] != "ok" {
				t.Errorf("%s: %q, want ok (%v)", k, lines[k], r)
			}
		}
		h.intact(t)
		rep := requireReport(t, r)
		if !contains(rep.Enforcement.Layers, "ipc-namespace") {
			// SEM_INFO and MSG_INFO sum up the host's objects whatever
			// the id: refused, though the id is the sandbox's.
			for _, k := range []string{"sem-info", "msg-info"} {
				if lines[k] == "ok" {
					t.Errorf("%s read the host's totals: %s", k, r.String())
				}
			}
			n := 0
			for _, dn := range rep.Denials {
				if dn.Op == "ipc" {
					n++
				}
			}
			if n < 5 {
				t.Errorf("%d ipc facts, want at least 5, for the host's objects: %+v", n, rep.Denials)
			}
			if contains(rep.Enforcement.Missing, "ipc-isolation") {
				t.Errorf("enforcement missing %q lists ipc-isolation", rep.Enforcement.Missing)
			}
		}
	})
}
