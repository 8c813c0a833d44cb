//go:build linux

package seccomp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Kind says how the supervisor must answer a notification.
type Kind int

const (
	// KindDeny: answer Errno and record a denial fact named Op.
	KindDeny Kind = iota + 1
	// KindPath: a write-like filesystem call; decide from its path arguments.
	KindPath
	// KindSocket: socket() of a forbidden address family.
	KindSocket
	// KindConnect: connect(); emulate for allowed unix sockets, deny the rest.
	KindConnect
	// KindSendto: sendto() with a destination address; emulate for allowed
	// unix sockets, deny the rest.
	KindSendto
	// KindSendmsg: sendmsg()/sendmmsg(); always emulated (their destination
	// is out of the filter's sight).
	KindSendmsg
	// KindBind: bind(); performed by the supervisor, which denies abstract
	// unix names a host client could reach and, while the network is off,
	// learns which socket files the sandbox created.
	KindBind
	// KindSched: a call that changes the scheduling, priority, I/O priority
	// or resource limits of another process (Rule.PidArg names it, or a
	// process group or user for setpriority/ioprio_set); only routed when
	// it does not name the caller itself.
	KindSched
	// KindSignal: a call that sends a signal to another process, process
	// group or thread (Rule.PidArg names it; for pidfd_send_signal it is a
	// pidfd); routed only when Spec.Signals.
	KindSignal
	// KindListen: listen(); routed only under Spec.Inet, so that the
	// supervisor can refuse (or perform) it: without a net namespace a
	// listening inet socket would be a port of the host.
	KindListen
	// KindMeta: a change of a file's metadata — mode, owner, times,
	// extended attributes (Rule.Op "chmod", "chown", "utimes", "setxattr"),
	// none of which Landlock covers; the inode-flag ioctls (MetaIoctl) go
	// with them under the ioctl rule.
	// chmod, fchmodat and fchmodat2 are always routed (for the change
	// facts), and fchmod with Spec.Notify; the rest only with Spec.Metadata, for a command that may
	// get no mount view: the supervisor then judges the target and
	// performs the call itself, or, with a mount view after all (whose
	// read-only mounts refuse them), lets it continue.
	KindMeta
	// KindIPC: a System V IPC call (shmget, shmat, shmctl, semget, semop,
	// semtimedop, semctl, msgget, msgsnd, msgrcv, msgctl) or mq_open /
	// mq_unlink. Always routed with Notify: a command without an IPC
	// namespace of its own reaches only the objects the sandbox made (the
	// supervisor judges the id, a register); with one, it continues.
	KindIPC
	// KindSockname: getsockname(); routed only under Spec.OwnAddress, so
	// that the supervisor shows the command's own loopback address on the
	// host's loopback as 127.0.0.1 (an address it reads, never a refusal).
	KindSockname
)

// Rule describes one notified system call.
type Rule struct {
	Name  string // system call name
	Kind  Kind
	Op    string     // denial fact op (e.g. "write", "mount")
	Errno unix.Errno // errno for KindDeny / pre-denials
	// PidArg is, for KindSched, the argument that names the process (for
	// setpriority and ioprio_set, the "who" after the "which" argument).
	PidArg int
}

// schedCalls change another process's scheduling or limits with only a
// same-user check: no LSM hook that Landlock implements covers them, so
// without a pid namespace a command could renice, pin or limit every
// process of its user. They are routed when their target is not the caller
// itself (a pid argument other than 0; for setpriority and ioprio_set, a
// "who" other than 0, or any request for a whole user).
var schedCalls = []struct {
	name   string
	pidArg int
}{
	{"setpriority", 1}, {"ioprio_set", 1}, {"prlimit64", 0},
	{"sched_setaffinity", 0}, {"sched_setscheduler", 0}, {"sched_setparam", 0}, {"sched_setattr", 0},
}

// signalCalls send a signal to a process named by a pid argument (a
// pidfd for pidfd_send_signal). Landlock scopes signals from ABI 6; before
// it, and without a pid namespace, a command could signal every process of
// its user. Routed when the pid argument is not 0 (kill(0, sig) is the
// caller's own process group).
var signalCalls = []struct {
	name   string
	pidArg int
}{
	{"kill", 0}, {"tkill", 0}, {"tgkill", 0}, {"rt_sigqueueinfo", 0}, {"rt_tgsigqueueinfo", 0},
	{"pidfd_send_signal", 0},
}

// Which-values of setpriority (PRIO_USER) and ioprio_set (IOPRIO_WHO_USER)
// that name every process of a user, "who" 0 being the caller's.
const (
	PrioUser      = 2
	IoprioWhoUser = 3
)

// Spec selects the filter's variant.
type Spec struct {
	// Network allows every socket family and connect().
	Network bool
	// Notify routes reportable calls to a user-notification listener. Without
	// it (kernel < 5.0) they are denied in the kernel: no facts, and connect()
	// is denied outright when the network is off.
	//
	// With Notify, open and openat with access mode 3 are routed too (besides
	// write flags, O_CREAT and O_TRUNC), and so are truncate and openat2: the
	// supervisor learns from the runner whether the command got a mount view
	// and refuses, from the call's registers alone, what Landlock cannot
	// stop without one (see DenyTruncate and DenyIoctlOpen).
	Notify bool
	// DenyTruncate (only without Notify; for a host with no mount view and
	// Landlock ABI < 3, which does not handle LANDLOCK_ACCESS_FS_TRUNCATE):
	// truncate(2) fails with EACCES, and so do open and openat with O_TRUNC
	// and an access mode that is not writable (O_RDONLY, or 3), which Linux
	// honours when DAC allows writing. ftruncate needs an fd open for
	// writing, and open(O_WRONLY|O_TRUNC) is Landlock's WRITE_FILE: both stay
	// allowed.
	DenyTruncate bool
	// DenyIoctlOpen (only without Notify; for a host with no mount view):
	// open and openat with access mode 3 (O_ACCMODE: read and write
	// permission checked, an fd usable only for ioctl) fail with EACCES.
	// Landlock requires no right at all for that access mode, so without it
	// a command could open, and ioctl, any file or device DAC lets it.
	DenyIoctlOpen bool
	// (With DenyTruncate or DenyIoctlOpen, openat2 fails with ENOSYS: its
	// flags lie in a struct the filter cannot see, and every caller falls
	// back to openat.)
	// Signals routes signal calls (kill, tkill, tgkill, rt_*sigqueueinfo,
	// pidfd_send_signal) to the listener: set it where Landlock does not
	// scope signals (ABI < 6). Only with Notify.
	Signals bool
	// Inet (network off, only with Notify) lets the command create AF_INET
	// and AF_INET6 sockets besides AF_UNIX ones, for the egress proxy of a
	// network allowlist: connect, sendto and sendmsg stay routed to the
	// supervisor, which lets a connection reach only the proxy and the
	// allowlist's loopback hosts (or, in a net namespace of the command's
	// own, its loopback).
	Inet bool
	// Metadata (only with Notify) routes every call that changes a
	// file's metadata (KindMeta: the chmod, chown, utimes and xattr
	// families, by path, *at and by descriptor, and the inode-flag
	// ioctls MetaIoctls), for a command that may run without a mount
	// view: Landlock does not cover them, so the supervisor performs
	// them itself on the files the policy lets the command change.
	// setxattrat, removexattrat and file_setattr (Linux 6.13, 6.17) keep
	// their target in memory behind flags the filter cannot see: they
	// fail with ENOSYS, and callers fall back to the older calls.
	// Without it (a mount view is expected, whose read-only mounts
	// refuse these calls in the kernel) only chmod, fchmodat, fchmodat2
	// and fchmod are routed, for the change facts and the audit.
	Metadata bool
	// OwnAddress (only with Inet) routes getsockname() to the listener:
	// without a net namespace the command's inet sockets are bound to an
	// address of its own on the host's loopback, which it is shown as
	// 127.0.0.1 (a server that prints its URL, or looks its name up).
	OwnAddress bool
}

// kernelOpenRules reports whether the filter refuses some opens, truncate
// and openat2 itself (no supervisor decides them).
func (s Spec) kernelOpenRules() bool { return s.DenyTruncate || s.DenyIoctlOpen }

func (s Spec) validate() error {
	if s.Notify && s.kernelOpenRules() {
		// With a listener the supervisor decides these per run, from the
		// runner's mount view: kernel rules would overlap the routing ones.
		return fmt.Errorf("seccomp: DenyTruncate and DenyIoctlOpen are for filters without user notification (%+v)", s)
	}
	if s.Inet && (s.Network || !s.Notify) {
		// Only the supervisor can tell an inet destination from a unix one.
		return fmt.Errorf("seccomp: Inet needs user notification and the network off (%+v)", s)
	}
	if s.Signals && !s.Notify {
		// Nothing could judge them in the kernel alone.
		return fmt.Errorf("seccomp: Signals needs user notification (%+v)", s)
	}
	if s.OwnAddress && !s.Inet {
		// Only inet sockets have an own address to show.
		return fmt.Errorf("seccomp: OwnAddress needs Inet (%+v)", s)
	}
	if s.Metadata && !s.Notify {
		// Only the supervisor can tell a file in the roots from one
		// outside.
		return fmt.Errorf("seccomp: Metadata needs user notification (%+v)", s)
	}
	return nil
}

// AccModeIoctl is the access mode 3 of open(2) (O_ACCMODE): read and write
// permission are checked, and the fd is usable only for ioctl.
const AccModeIoctl = unix.O_ACCMODE

var denyCalls = []struct {
	op    string
	names []string
}{
	{"ptrace", []string{"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"}},
	{"mount", []string{"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fspick", "fsconfig", "mount_setattr", "chroot"}},
	{"namespace", []string{"unshare", "setns"}},
	{"keyring", []string{"keyctl", "add_key", "request_key"}},
	{"bpf", []string{"bpf"}},
	{"perf", []string{"perf_event_open"}},
	{"userfaultfd", []string{"userfaultfd"}},
	{"kexec", []string{"kexec_load", "kexec_file_load", "reboot"}},
	{"module", []string{"init_module", "finit_module", "delete_module"}},
	{"system", []string{"swapon", "swapoff", "acct", "quotactl", "iopl", "ioperm", "syslog", "lookup_dcookie", "open_by_handle_at", "name_to_handle_at"}},
}

var pathCalls = []struct{ op, name string }{
	{"write", "creat"}, {"write", "openat2"}, {"truncate", "truncate"},
	{"mkdir", "mkdir"}, {"mkdir", "mkdirat"}, {"mknod", "mknod"}, {"mknod", "mknodat"},
	{"remove", "unlink"}, {"remove", "unlinkat"}, {"remove", "rmdir"},
	{"rename", "rename"}, {"rename", "renameat"}, {"rename", "renameat2"},
	{"link", "link"}, {"link", "linkat"}, {"symlink", "symlink"}, {"symlink", "symlinkat"},
}

// Metadata calls, by op (KindMeta). The chmod ones by path are always
// routed; the rest only with Spec.Metadata.
var (
	chmodCalls = []string{"chmod", "fchmodat", "fchmodat2"}
	metaCalls  = []struct {
		op    string
		names []string
	}{
		{"chown", []string{"chown", "fchown", "lchown", "fchownat"}},
		{"utimes", []string{"utime", "utimes", "futimesat", "utimensat"}},
		{"setxattr", []string{"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"}},
	}
	// newMetaCalls take their target behind flags or a struct in memory,
	// and are newer than the libseccomp this is built with may know: by
	// number, ENOSYS with Spec.Metadata.
	newMetaCalls = []int{unix.SYS_SETXATTRAT, unix.SYS_REMOVEXATTRAT, unix.SYS_FILE_SETATTR}
)

// SetIDBits are the mode bits no file of a confined command gets (set-
// user-ID, set-group-ID): a change of mode asking for them is routed (the
// supervisor applies it without them), a creation with them refused; the
// kernel refuses both without user notification.
const SetIDBits = unix.S_ISUID | unix.S_ISGID

// setIDModeArg is the argument holding the mode of the calls that can set
// set-ID bits; flagsArg, when not -1, the flags that make the call create
// a file only with O_CREAT or O_TMPFILE.
var setIDModeArg = []struct {
	name              string
	modeArg, flagsArg int
}{
	{"chmod", 1, -1}, {"fchmod", 1, -1}, {"fchmodat", 2, -1}, {"fchmodat2", 2, -1},
	{"creat", 1, -1}, {"mknod", 1, -1}, {"mknodat", 2, -1},
	{"open", 2, 1}, {"openat", 3, 2},
}

// ipcCalls reach System V IPC objects by key or id, and POSIX message
// queues by name (KindIPC).
var ipcCalls = []string{"shmget", "shmat", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink"}

// Inode-flag ioctls: owner-only changes of a file that Landlock does not
// cover (its IOCTL_DEV right is for devices only), routed with
// Spec.Metadata (the ioctl rule stays KindDeny, for its other requests; the
// supervisor tells them apart with MetaIoctl, and records its denials as op
// "chattr").
const (
	FSIocSetFlags     = unix.FS_IOC_SETFLAGS                   // chattr: append-only, immutable (CAP_LINUX_IMMUTABLE), noatime, nodump...
	FSIocFSSetXattr   = iocWrite | 28<<16 | 'X'<<8 | 32        // FS_IOC_FSSETXATTR, _IOW('X', 32, struct fsxattr): the same flags, extent size, project
	FSIocSetVersion   = iocWrite | sizeofLong<<16 | 'v'<<8 | 2 // FS_IOC_SETVERSION, _IOW('v', 2, long): the inode's generation (ext4)
	FSIocEnableVerity = unix.FS_IOC_ENABLE_VERITY              // makes a file's contents read-only for good (fs-verity)
)

// iocWrite is this architecture's _IOC_WRITE direction, taken from
// FS_IOC_SETFLAGS, _IOW('f', 2, long).
const (
	sizeofLong = uint64(unsafe.Sizeof(uintptr(0)))
	iocWrite   = unix.FS_IOC_SETFLAGS - (sizeofLong<<16 | 'f'<<8 | 2)
)

// metaIoctls are the requests of FSIoc*.
var metaIoctls = []uint64{FSIocSetFlags, FSIocFSSetXattr, FSIocSetVersion, FSIocEnableVerity}

// MetaIoctl reports whether an ioctl request (an unsigned int: the low 32
// bits count) is one of the inode-flag ioctls routed with Spec.Metadata.
func MetaIoctl(req uint64) bool {
	switch req & 0xffffffff {
	case FSIocSetFlags, FSIocFSSetXattr, FSIocSetVersion, FSIocEnableVerity:
		return true
	}
	return false
}

// nsFlags are the clone flags that create namespaces.
var nsFlags = []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET}

// UserfaultfdIocNew is USERFAULTFD_IOC_NEW, _IO(0xAA, 0x00): the ioctl of
// /dev/userfaultfd (Linux 6.1+) that makes a userfaultfd without the
// userfaultfd system call.
const UserfaultfdIocNew = 0xAA00

// The filesystem-state ioctls refused in every confined mode. Each takes a
// descriptor opened for reading only (which Landlock and the supervisor
// let through) and changes what is beyond the file: btrfs makes or removes
// a directory entry — a subvolume, a snapshot (a copy of a whole subvolume
// the caller owns) — without the path hooks Landlock mediates
// (btrfs_mksubvol checks only the directory's mode), or changes a
// subvolume the caller owns (read-only flag, received UUID); fscrypt sets
// an empty directory's encryption policy, or adds or removes a key in the
// filesystem's keyring (removing the user's claim locks the user's
// encrypted files on the host). Only a read-only mount (the mount view's,
// outside the writable roots) stops them in the kernel; no agent needs
// them. _IOC(dir, 0x94, nr, size) for btrfs (BTRFS_IOCTL_MAGIC).
const (
	iocRead = unix.FS_IOC_GETFLAGS - (sizeofLong<<16 | 'f'<<8 | 1)

	BtrfsIocSnapCreate        = iocWrite | 4096<<16 | 0x94<<8 | 1
	BtrfsIocSubvolCreate      = iocWrite | 4096<<16 | 0x94<<8 | 14
	BtrfsIocSnapDestroy       = iocWrite | 4096<<16 | 0x94<<8 | 15
	BtrfsIocSnapCreateV2      = iocWrite | 4096<<16 | 0x94<<8 | 23
	BtrfsIocSubvolCreateV2    = iocWrite | 4096<<16 | 0x94<<8 | 24
	BtrfsIocSubvolSetflags    = iocWrite | 8<<16 | 0x94<<8 | 26
	BtrfsIocSetReceivedSubvol = iocRead | iocWrite | 200<<16 | 0x94<<8 | 37
	BtrfsIocSnapDestroyV2     = iocWrite | 4096<<16 | 0x94<<8 | 63
)

// DeniedIoctlName names a request of deniedIoctls ("" for any other).
func DeniedIoctlName(req uint64) string {
	switch req & 0xffffffff {
	case unix.TIOCSTI:
		return "TIOCSTI"
	case unix.TIOCLINUX:
		return "TIOCLINUX"
	case UserfaultfdIocNew:
		return "USERFAULTFD_IOC_NEW"
	case BtrfsIocSnapCreate:
		return "BTRFS_IOC_SNAP_CREATE"
	case BtrfsIocSubvolCreate:
		return "BTRFS_IOC_SUBVOL_CREATE"
	case BtrfsIocSnapDestroy:
		return "BTRFS_IOC_SNAP_DESTROY"
	case BtrfsIocSnapCreateV2:
		return "BTRFS_IOC_SNAP_CREATE_V2"
	case BtrfsIocSubvolCreateV2:
		return "BTRFS_IOC_SUBVOL_CREATE_V2"
	case BtrfsIocSubvolSetflags:
		return "BTRFS_IOC_SUBVOL_SETFLAGS"
	case BtrfsIocSetReceivedSubvol:
		return "BTRFS_IOC_SET_RECEIVED_SUBVOL"
	case BtrfsIocSnapDestroyV2:
		return "BTRFS_IOC_SNAP_DESTROY_V2"
	case unix.FS_IOC_SET_ENCRYPTION_POLICY:
		return "FS_IOC_SET_ENCRYPTION_POLICY"
	case unix.FS_IOC_ADD_ENCRYPTION_KEY:
		return "FS_IOC_ADD_ENCRYPTION_KEY"
	case unix.FS_IOC_REMOVE_ENCRYPTION_KEY:
		return "FS_IOC_REMOVE_ENCRYPTION_KEY"
	case unix.FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS:
		return "FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS"
	}
	return ""
}

// The denied ioctl requests: TIOCSTI and TIOCLINUX inject terminal input /
// drive the console; USERFAULTFD_IOC_NEW is the other door to userfaultfd,
// which could stall the supervisor's reads of a command's memory (a fault on
// a registered page waits for the command's handler). The device is 0600
// root, so a root command could open it: Landlock's IOCTL_DEV (ABI 5) would
// stop the ioctl, but not on older kernels nor without Landlock. Then the
// filesystem-state requests (see BtrfsIocSnapCreate).
var deniedIoctls = []uint64{unix.TIOCSTI, unix.TIOCLINUX, UserfaultfdIocNew,
	BtrfsIocSnapCreate, BtrfsIocSubvolCreate, BtrfsIocSnapDestroy, BtrfsIocSnapCreateV2,
	BtrfsIocSubvolCreateV2, BtrfsIocSubvolSetflags, BtrfsIocSetReceivedSubvol, BtrfsIocSnapDestroyV2,
	unix.FS_IOC_SET_ENCRYPTION_POLICY, unix.FS_IOC_ADD_ENCRYPTION_KEY,
	unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unix.FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS}

// index numbers the variants of Spec (a bit per field; specOf inverts it).
func (s Spec) index() int {
	i := 0
	for bit, on := range []bool{s.Network, s.Notify, s.DenyTruncate, s.DenyIoctlOpen, s.Signals, s.Inet, s.Metadata, s.OwnAddress} {
		if on {
			i |= 1 << bit
		}
	}
	return i
}

// numVariants is the number of values of Spec.
const numVariants = 1 << 8

func specOf(i int) Spec {
	return Spec{Network: i&1 != 0, Notify: i&2 != 0, DenyTruncate: i&4 != 0, DenyIoctlOpen: i&8 != 0, Signals: i&16 != 0, Inet: i&32 != 0,
		Metadata: i&64 != 0, OwnAddress: i&128 != 0}
}

//go:generate go test -run ^TestEmbeddedPrograms$ -update .

// variants memoizes Table and Program: both are pure functions of the Spec
// (and of this host's libseccomp), and building them costs about 0.2 ms a
// command. Its zero value is ready: a process pays for a variant when it
// first uses it, never at start.
var variants [numVariants]variant

// variant is one Spec's memoized Table and Program.
type variant struct {
	tableOnce   sync.Once
	table       map[int32]Rule
	tableErr    error
	programOnce sync.Once
	program     []byte
	programErr  error
}

// Table returns the notified system calls of the filter built from s, keyed
// by system call number. The supervisor uses it to interpret notifications.
// The map is shared: callers must not modify it.
func Table(s Spec) (map[int32]Rule, error) {
	v := &variants[s.index()]
	v.tableOnce.Do(func() { v.table, v.tableErr = table(s) })
	return v.table, v.tableErr
}

// Program returns the BPF program (an array of struct sock_filter) of the
// filter for s. The runner loads it with seccomp(2), with
// SECCOMP_FILTER_FLAG_NEW_LISTENER when s.Notify, after setting no_new_privs.
//
// On amd64 the programs are compiled ahead of time (go generate, from the
// same rules and libseccomp; TestEmbeddedPrograms checks that they equal a
// fresh build), which saves a process its first build.
func Program(s Spec) ([]byte, error) {
	if p := embeddedPrograms[s.index()]; p != "" {
		return []byte(p), nil
	}
	v := &variants[s.index()]
	v.programOnce.Do(func() { v.program, v.programErr = program(s) })
	return bytes.Clone(v.program), v.programErr
}

func table(s Spec) (map[int32]Rule, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	t := map[int32]Rule{}
	add := func(name string, r Rule) error {
		nr, err := libseccomp.GetSyscallFromName(name)
		if err != nil {
			return fmt.Errorf("seccomp: unknown syscall %s: %w", name, err)
		}
		r.Name = name
		t[int32(nr)] = r
		return nil
	}
	for _, g := range denyCalls {
		for _, n := range g.names {
			if err := add(n, Rule{Kind: KindDeny, Op: g.op, Errno: unix.EPERM}); err != nil {
				return nil, err
			}
		}
	}
	if err := add("clone", Rule{Kind: KindDeny, Op: "namespace", Errno: unix.EPERM}); err != nil {
		return nil, err
	}
	if err := add("ioctl", Rule{Kind: KindDeny, Op: "ioctl", Errno: unix.EPERM}); err != nil {
		return nil, err
	}
	for _, n := range []string{"open", "openat"} {
		if err := add(n, Rule{Kind: KindPath, Op: "write", Errno: unix.EACCES}); err != nil {
			return nil, err
		}
	}
	for _, c := range pathCalls {
		if err := add(c.name, Rule{Kind: KindPath, Op: c.op, Errno: unix.EACCES}); err != nil {
			return nil, err
		}
	}
	for _, n := range chmodCalls {
		if err := add(n, Rule{Kind: KindMeta, Op: "chmod", Errno: unix.EROFS}); err != nil {
			return nil, err
		}
	}
	// fchmod: every call with Notify (with Metadata the supervisor
	// performs it; otherwise it continues, or, when its mode has set-ID
	// bits (SetIDBits), is performed without them); without Notify the
	// kernel refuses set-ID bits.
	if err := add("fchmod", Rule{Kind: KindMeta, Op: "chmod", Errno: unix.EROFS}); err != nil {
		return nil, err
	}
	if s.Metadata {
		// EROFS: what the mount view's read-only mounts answer.
		for _, g := range metaCalls {
			for _, n := range g.names {
				if err := add(n, Rule{Kind: KindMeta, Op: g.op, Errno: unix.EROFS}); err != nil {
					return nil, err
				}
			}
		}
	}
	if s.Notify {
		for _, n := range ipcCalls {
			if err := add(n, Rule{Kind: KindIPC, Op: "ipc", Errno: unix.EACCES}); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range schedCalls {
		if err := add(c.name, Rule{Kind: KindSched, Op: "sched", Errno: unix.EPERM, PidArg: c.pidArg}); err != nil {
			return nil, err
		}
	}
	if s.Notify && s.Signals {
		for _, c := range signalCalls {
			if err := add(c.name, Rule{Kind: KindSignal, Op: "signal", Errno: unix.EPERM, PidArg: c.pidArg}); err != nil {
				return nil, err
			}
		}
	}
	if s.Notify {
		// Without user notification nothing can look at the address:
		// bind stays the kernel's (see KindBind).
		if err := add("bind", Rule{Kind: KindBind, Op: "bind", Errno: unix.EACCES}); err != nil {
			return nil, err
		}
	}
	if s.Inet {
		if err := add("listen", Rule{Kind: KindListen, Op: "listen", Errno: unix.EACCES}); err != nil {
			return nil, err
		}
		if s.OwnAddress {
			if err := add("getsockname", Rule{Kind: KindSockname, Op: "getsockname", Errno: unix.EBADF}); err != nil {
				return nil, err
			}
		}
	}
	if !s.Network {
		if err := add("socket", Rule{Kind: KindSocket, Op: "socket", Errno: unix.EACCES}); err != nil {
			return nil, err
		}
		if err := add("connect", Rule{Kind: KindConnect, Op: "connect", Errno: unix.EACCES}); err != nil {
			return nil, err
		}
		for _, n := range []string{"sendto", "sendmsg", "sendmmsg"} {
			k := KindSendto
			if n != "sendto" {
				k = KindSendmsg
			}
			if err := add(n, Rule{Kind: k, Op: "send", Errno: unix.EACCES}); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

func program(s Spec) ([]byte, error) {
	f, err := build(s)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	// seccomp_export_bpf_mem needs libseccomp >= 2.6; export to a memfd.
	fd, err := unix.MemfdCreate("dsh-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp: export filter: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "dsh-seccomp-bpf")
	defer mf.Close()
	if err := f.ExportBPF(mf); err != nil {
		return nil, fmt.Errorf("seccomp: export filter: %w", err)
	}
	b, err := io.ReadAll(io.NewSectionReader(mf, 0, 1<<20))
	if err != nil || len(b) == 0 || len(b)%8 != 0 {
		return nil, fmt.Errorf("seccomp: export filter: %d bytes, %v", len(b), err)
	}
	return b, nil
}

func errnoAct(e unix.Errno) libseccomp.ScmpAction {
	return libseccomp.ActErrno.SetReturnCode(int16(e))
}

func build(s Spec) (*libseccomp.ScmpFilter, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return nil, fmt.Errorf("seccomp: new filter: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Release()
		}
	}()
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, fmt.Errorf("seccomp: bad-arch action: %w", err)
	}
	if err := f.SetNoNewPrivsBit(true); err != nil {
		return nil, fmt.Errorf("seccomp: no_new_privs: %w", err)
	}
	notified, err := table(s)
	if err != nil {
		return nil, err
	}
	// act returns the action for a notified rule: notify, or its errno when
	// the kernel has no user notification.
	act := func(r Rule) libseccomp.ScmpAction {
		if s.Notify {
			return libseccomp.ActNotify
		}
		return errnoAct(r.Errno)
	}
	r := &rules{f: f}
	for nr, rule := range notified {
		call := libseccomp.ScmpSyscall(nr)
		switch rule.Name {
		case "clone":
			for _, fl := range nsFlags {
				r.masked(call, act(rule), 0, fl, fl)
			}
		case "ioctl":
			for _, req := range deniedIoctls {
				r.masked(call, act(rule), 1, 0xffffffff, req)
			}
			if s.Metadata {
				for _, req := range metaIoctls {
					r.masked(call, act(rule), 1, 0xffffffff, req)
				}
			}
		case "open", "openat":
			arg := uint(1)
			if rule.Name == "openat" {
				arg = 2
			}
			if !s.Notify {
				// Landlock and the mount view enforce writes; nothing to
				// report. What Landlock cannot see without a mount view is
				// refused here (the flags are an int: masks below 2^32).
				deny := errnoAct(unix.EACCES)
				if s.DenyIoctlOpen {
					r.masked(call, deny, arg, unix.O_ACCMODE, AccModeIoctl)
				}
				if s.DenyTruncate {
					r.masked(call, deny, arg, unix.O_ACCMODE|unix.O_TRUNC, unix.O_RDONLY|unix.O_TRUNC)
					if !s.DenyIoctlOpen {
						r.masked(call, deny, arg, unix.O_ACCMODE|unix.O_TRUNC, AccModeIoctl|unix.O_TRUNC)
					}
				}
				continue
			}
			r.masked(call, act(rule), arg, unix.O_ACCMODE, unix.O_WRONLY)
			r.masked(call, act(rule), arg, unix.O_ACCMODE, unix.O_RDWR)
			r.masked(call, act(rule), arg, unix.O_ACCMODE, AccModeIoctl)
			r.masked(call, act(rule), arg, unix.O_CREAT, unix.O_CREAT)
			r.masked(call, act(rule), arg, unix.O_TRUNC, unix.O_TRUNC)
		case "fchmod":
			if s.Notify {
				// Every call: a mode change by descriptor of a file no
				// routed call named (a hook made executable) is a change
				// the supervisor must see (Notifier.MayHaveChanged).
				r.plain(call, act(rule))
			}
		case "truncate":
			if s.Notify {
				r.plain(call, act(rule))
			} else if s.DenyTruncate {
				r.plain(call, errnoAct(unix.EACCES))
			}
		case "openat2":
			if s.Notify {
				r.plain(call, act(rule))
			} else if s.kernelOpenRules() {
				r.plain(call, errnoAct(unix.ENOSYS))
			}
		case "socket":
			if !s.Inet {
				r.notEqual(call, act(rule), 0, unix.AF_UNIX)
				continue
			}
			// Every family but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK
			// with NETLINK_ROUTE (getaddrinfo's AI_ADDRCONFIG and
			// getifaddrs read the interfaces, as /proc/net does; changing
			// them needs CAP_NET_ADMIN): one rule per value below
			// AF_NETLINK, one for those above, one for the other netlink
			// protocols.
			for fam := uint64(0); fam < unix.AF_NETLINK; fam++ {
				if fam != unix.AF_UNIX && fam != unix.AF_INET && fam != unix.AF_INET6 {
					r.cond(call, act(rule), 0, libseccomp.CompareEqual, fam)
				}
			}
			r.cond(call, act(rule), 0, libseccomp.CompareGreater, unix.AF_NETLINK)
			r.conds(call, act(rule),
				cond{arg: 0, op: libseccomp.CompareEqual, val: unix.AF_NETLINK}, cond{arg: 2, op: libseccomp.CompareNotEqual, val: unix.NETLINK_ROUTE})
		case "sendto":
			// Only sendto with a destination; on a connected socket the
			// destination was checked at connect.
			r.notEqual(call, act(rule), 4, 0)
		case "setpriority", "ioprio_set":
			// Another process, process group or user ("who" != 0), or
			// every process of the caller's user.
			r.notEqual(call, act(rule), uint(rule.PidArg), 0)
			user := uint64(PrioUser)
			if rule.Name == "ioprio_set" {
				user = IoprioWhoUser
			}
			r.masked(call, act(rule), 0, 0xffffffff, user)
		default:
			if rule.Name == "pidfd_send_signal" {
				r.plain(call, act(rule)) // fd 0 may well be a pidfd
				continue
			}
			if rule.Kind == KindSched || rule.Kind == KindSignal {
				// Another process: the pid argument is not 0.
				r.notEqual(call, act(rule), uint(rule.PidArg), 0)
				continue
			}
			if (rule.Kind == KindPath || rule.Kind == KindMeta) && !s.Notify {
				continue
			}
			r.plain(call, act(rule))
		}
	}
	for _, n := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register"} {
		r.name(n, errnoAct(unix.EPERM))
	}
	r.name("clone3", errnoAct(unix.ENOSYS))
	if !s.Notify {
		// No supervisor to apply a change of mode without them: every
		// call that would set set-ID bits fails (a creation only with
		// O_CREAT or O_TMPFILE; flags and mode are ints).
		for _, c := range setIDModeArg {
			nr, err := libseccomp.GetSyscallFromName(c.name)
			if err != nil {
				return nil, fmt.Errorf("seccomp: unknown syscall %s: %w", c.name, err)
			}
			for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
				mode := cond{arg: uint(c.modeArg), op: libseccomp.CompareMaskedEqual, mask: bit, val: bit}
				if c.flagsArg < 0 {
					r.conds(libseccomp.ScmpSyscall(nr), errnoAct(unix.EPERM), mode)
					continue
				}
				for _, fl := range []uint64{unix.O_CREAT, unix.O_TMPFILE} {
					flags := cond{arg: uint(c.flagsArg), op: libseccomp.CompareMaskedEqual, mask: fl, val: fl}
					r.conds(libseccomp.ScmpSyscall(nr), errnoAct(unix.EPERM), mode, flags)
				}
			}
		}
	}
	if s.Metadata {
		for _, nr := range newMetaCalls {
			r.plain(libseccomp.ScmpSyscall(nr), errnoAct(unix.ENOSYS))
		}
	}
	if !s.Network {
		if nr, err := libseccomp.GetSyscallFromName("socketpair"); err == nil {
			r.notEqual(nr, errnoAct(unix.EACCES), 0, unix.AF_UNIX)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	ok = true
	return f, nil
}

// rules collects the first error of a sequence of AddRule calls.
type rules struct {
	f   *libseccomp.ScmpFilter
	err error
}

func (r *rules) plain(call libseccomp.ScmpSyscall, a libseccomp.ScmpAction) {
	if r.err == nil {
		if err := r.f.AddRule(call, a); err != nil {
			r.err = fmt.Errorf("seccomp: rule %d: %w", call, err)
		}
	}
}

func (r *rules) name(n string, a libseccomp.ScmpAction) {
	nr, err := libseccomp.GetSyscallFromName(n)
	if err != nil {
		r.err = errors.Join(r.err, fmt.Errorf("seccomp: unknown syscall %s: %w", n, err))
		return
	}
	r.plain(nr, a)
}

// masked adds a rule matching (arg & mask) == value.
func (r *rules) masked(call libseccomp.ScmpSyscall, a libseccomp.ScmpAction, arg uint, mask, value uint64) {
	r.cond(call, a, arg, libseccomp.CompareMaskedEqual, mask, value)
}

// notEqual adds a rule matching arg != v over all 64 bits: garbage upper
// bits make the argument unequal, so the rule fails safe.
func (r *rules) notEqual(call libseccomp.ScmpSyscall, a libseccomp.ScmpAction, arg uint, v uint64) {
	r.cond(call, a, arg, libseccomp.CompareNotEqual, v)
}

func (r *rules) cond(call libseccomp.ScmpSyscall, a libseccomp.ScmpAction, arg uint, op libseccomp.ScmpCompareOp, vals ...uint64) {
	if r.err != nil {
		return
	}
	c, err := libseccomp.MakeCondition(arg, op, vals...)
	if err != nil {
		r.err = fmt.Errorf("seccomp: condition on %d: %w", call, err)
		return
	}
	if err := r.f.AddRuleConditional(call, a, []libseccomp.ScmpCondition{c}); err != nil {
		r.err = fmt.Errorf("seccomp: conditional rule %d: %w", call, err)
	}
}

// cond is one argument comparison of a rule.
type cond struct {
	arg uint
	op  libseccomp.ScmpCompareOp
	val uint64
	// mask, for CompareMaskedEqual: the condition is (arg & mask) == val.
	mask uint64
}

// conds adds a rule matching every one of cs.
func (r *rules) conds(call libseccomp.ScmpSyscall, a libseccomp.ScmpAction, cs ...cond) {
	if r.err != nil {
		return
	}
	var sc []libseccomp.ScmpCondition
	for _, c := range cs {
		vals := []uint64{c.val}
		if c.op == libseccomp.CompareMaskedEqual {
			vals = []uint64{c.mask, c.val}
		}
		x, err := libseccomp.MakeCondition(c.arg, c.op, vals...)
		if err != nil {
			r.err = fmt.Errorf("seccomp: condition on %d: %w", call, err)
			return
		}
		sc = append(sc, x)
	}
	if err := r.f.AddRuleConditional(call, a, sc); err != nil {
		r.err = fmt.Errorf("seccomp: conditional rule %d: %w", call, err)
	}
}

// NotifySupported reports whether the kernel and libseccomp offer user
// notification (SECCOMP_GET_NOTIF_SIZES works and libseccomp API >= 5).
func NotifySupported() bool {
	api, err := libseccomp.GetAPI()
	if err != nil || api < 5 {
		return false
	}
	var sizes [3]uint16
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, 3 /* SECCOMP_GET_NOTIF_SIZES */, 0, uintptr(unsafePointer(&sizes)))
	return e == 0
}

// Supported reports whether seccomp filtering is available at all.
func Supported() bool {
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		return false
	}
	api, err := libseccomp.GetAPI()
	return err == nil && api >= 1
}
