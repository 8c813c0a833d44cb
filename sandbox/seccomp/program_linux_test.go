package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// run evaluates a classic BPF seccomp program on struct seccomp_data (x86_64,
// little-endian) and returns its action. It knows the instructions
// libseccomp emits for these filters and fails the test on any other, so a
// program it cannot read is never taken for an answer.
func run(t *testing.T, prog []byte, nr int32, args [6]uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.LittleEndian.PutUint32(data[0:], uint32(nr))
	binary.LittleEndian.PutUint32(data[4:], unix.AUDIT_ARCH_X86_64)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc, steps := 0, 0; steps < 10000; steps++ {
		if pc < 0 || 8*pc+8 > len(prog) {
			t.Fatalf("bpf: pc %d out of the program", pc)
		}
		in := prog[8*pc : 8*pc+8]
		code := binary.LittleEndian.Uint16(in[0:])
		jt, jf := int(in[2]), int(in[3])
		k := binary.LittleEndian.Uint32(in[4:])
		pc++
		switch code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if k%4 != 0 || k+4 > uint32(len(data)) {
				t.Fatalf("bpf: load at %d", k)
			}
			acc = binary.LittleEndian.Uint32(data[k:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= k
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var cond bool
			switch code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				cond = acc == k
			case unix.BPF_JGT:
				cond = acc > k
			case unix.BPF_JGE:
				cond = acc >= k
			default:
				cond = acc&k != 0
			}
			if cond {
				pc += jt
			} else {
				pc += jf
			}
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(k)
		case unix.BPF_RET | unix.BPF_K:
			return k
		default:
			t.Fatalf("bpf: instruction %#x at %d not understood", code, pc-1)
		}
	}
	t.Fatal("bpf: the program does not end")
	return 0
}

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retNotify = unix.SECCOMP_RET_USER_NOTIF
)

func actionName(a uint32) string {
	switch {
	case a == retAllow:
		return "allow"
	case a == retNotify:
		return "notify"
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return unix.ErrnoName(unix.Errno(a & unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("%#x", a)
}

// TestProgramOpenRules: what each variant does with the calls that can
// truncate a file or open one for ioctl only, judged on the program itself
// (every access mode and flag, garbage in the upper 32 bits of the int).
func TestProgramOpenRules(t *testing.T) {
	const garbage = 0xdead_beef_0000_0000
	trunc := uint64(unix.O_TRUNC)
	type call struct {
		name  string
		flags uint64 // the flags argument, for open and openat
	}
	calls := []call{
		{"open", unix.O_RDONLY}, {"open", unix.O_WRONLY}, {"open", unix.O_RDWR}, {"open", AccModeIoctl},
		{"open", unix.O_RDONLY | trunc}, {"open", unix.O_WRONLY | trunc}, {"open", unix.O_RDWR | trunc}, {"open", AccModeIoctl | trunc},
		{"openat", unix.O_RDONLY}, {"openat", AccModeIoctl}, {"openat", AccModeIoctl | garbage},
		{"openat", unix.O_RDONLY | trunc}, {"openat", unix.O_RDONLY | unix.O_CREAT | trunc}, {"openat", unix.O_RDONLY | trunc | garbage},
		{"openat", unix.O_WRONLY | trunc}, {"openat", unix.O_RDONLY | garbage},
		{"truncate", 0}, {"ftruncate", 0}, {"openat2", 0},
	}
	key := func(c call) string { return fmt.Sprintf("%s %#x", c.name, c.flags) }
	// want lists the calls that are not allowed; every other one must be.
	for _, tc := range []struct {
		name string
		spec Spec
		want map[string]string
	}{
		{"no notify", Spec{}, map[string]string{}},
		{"no notify, deny ioctl opens", Spec{DenyIoctlOpen: true}, map[string]string{
			"open 0x3": "EACCES", "open 0x203": "EACCES", "openat 0x3": "EACCES", "openat 0xdeadbeef00000003": "EACCES",
			"openat2 0x0": "ENOSYS",
		}},
		{"no notify, deny truncate", Spec{DenyTruncate: true}, map[string]string{
			"open 0x200": "EACCES", "open 0x203": "EACCES", "openat 0x200": "EACCES", "openat 0x240": "EACCES",
			"openat 0xdeadbeef00000200": "EACCES", "truncate 0x0": "EACCES", "openat2 0x0": "ENOSYS",
		}},
		{"no notify, deny both", Spec{DenyTruncate: true, DenyIoctlOpen: true}, map[string]string{
			"open 0x3": "EACCES", "open 0x203": "EACCES", "openat 0x3": "EACCES", "openat 0xdeadbeef00000003": "EACCES",
			"open 0x200": "EACCES", "openat 0x200": "EACCES", "openat 0x240": "EACCES", "openat 0xdeadbeef00000200": "EACCES",
			"truncate 0x0": "EACCES", "openat2 0x0": "ENOSYS",
		}},
		{"notify", Spec{Notify: true}, map[string]string{
			"open 0x1": "notify", "open 0x2": "notify", "open 0x3": "notify", "open 0x200": "notify", "open 0x201": "notify",
			"open 0x202": "notify", "open 0x203": "notify", "openat 0x3": "notify", "openat 0xdeadbeef00000003": "notify",
			"openat 0x200": "notify", "openat 0x240": "notify", "openat 0xdeadbeef00000200": "notify", "openat 0x201": "notify",
			"truncate 0x0": "notify", "openat2 0x0": "notify",
		}},
	} {
		for _, network := range []bool{false, true} {
			s := tc.spec
			s.Network = network
			t.Run(fmt.Sprintf("%s/network=%v", tc.name, network), func(t *testing.T) {
				prog, err := Program(s)
				require.NoError(t, err)
				for _, c := range calls {
					nr, err := libseccomp.GetSyscallFromName(c.name)
					require.NoError(t, err)
					var args [6]uint64
					switch c.name {
					case "open":
						args[1] = c.flags
					case "openat":
						args[0], args[2] = atFDCWD, c.flags
					}
					want := "allow"
					if w, ok := tc.want[key(c)]; ok {
						want = w
					}
					assert.Equal(t, want, actionName(run(t, prog, int32(nr), args)), key(c))
				}
			})
		}
	}
}

// TestProgramMetadata: the metadata calls each variant routes. The chmod
// ones always (for the change facts and the audit); with Metadata every change of
// mode, owner, times, xattrs and the inode-flag ioctls (garbage in the
// upper bits of the request included), and setxattrat, removexattrat and
// file_setattr fail with ENOSYS; without it the rest is the kernel's (the
// mount view refuses them).
func TestProgramMetadata(t *testing.T) {
	const garbage = 0xdead_beef_0000_0000
	chmods := []string{"chmod", "fchmodat", "fchmodat2", "fchmod"}
	rest := []string{"chown", "fchown", "lchown", "fchownat", "utime", "utimes", "futimesat", "utimensat",
		"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"}
	for _, metadata := range []bool{false, true} {
		s := Spec{Notify: true, Metadata: metadata}
		prog, err := Program(s)
		require.NoError(t, err)
		tab, err := Table(s)
		require.NoError(t, err)
		for _, name := range append(append([]string{}, chmods...), rest...) {
			nr, err := libseccomp.GetSyscallFromName(name)
			require.NoError(t, err)
			want, routed := "allow", metadata || slices.Contains(chmods, name)
			if routed {
				want = "notify"
			}
			if routed {
				assert.Equal(t, KindMeta, tab[int32(nr)].Kind, name)
				assert.Equal(t, unix.EROFS, tab[int32(nr)].Errno, name)
			} else {
				assert.NotContains(t, tab, int32(nr), name)
			}
			assert.Equal(t, want, actionName(run(t, prog, int32(nr), [6]uint64{})), "%s, metadata=%v", name, metadata)
		}
		for _, nr := range []int{unix.SYS_SETXATTRAT, unix.SYS_REMOVEXATTRAT, unix.SYS_FILE_SETATTR} {
			want := "allow"
			if metadata {
				want = "ENOSYS"
			}
			assert.Equal(t, want, actionName(run(t, prog, int32(nr), [6]uint64{})), "syscall %d, metadata=%v", nr, metadata)
		}
		ioctl, err := libseccomp.GetSyscallFromName("ioctl")
		require.NoError(t, err)
		for _, req := range []uint64{FSIocSetFlags, FSIocFSSetXattr, FSIocSetVersion, FSIocEnableVerity, FSIocSetFlags | garbage} {
			want := "allow"
			if metadata {
				want = "notify"
			}
			assert.True(t, MetaIoctl(req), "%#x", req)
			assert.Equal(t, want, actionName(run(t, prog, int32(ioctl), [6]uint64{1: req})), "ioctl %#x, metadata=%v", req, metadata)
		}
		for _, req := range []uint64{unix.FS_IOC_GETFLAGS, unix.TCGETS, 0x40046602 /* FS_IOC32_SETFLAGS: compat only */} {
			assert.False(t, MetaIoctl(req), "%#x", req)
			assert.Equal(t, "allow", actionName(run(t, prog, int32(ioctl), [6]uint64{1: req})), "ioctl %#x", req)
		}
	}
	_, err := Program(Spec{Metadata: true})
	assert.Error(t, err, "Metadata without Notify: nothing could perform them")
}

// TestSpecVariants: every variant has its own memoized table and program;
// kernel open rules and user notification do not mix.
func TestSpecVariants(t *testing.T) {
	seen := map[string]Spec{}
	for i := range numVariants {
		s := specOf(i)
		require.Equal(t, i, s.index(), "%+v", s)
		prog, perr := Program(s)
		tab, terr := Table(s)
		if s.Notify && (s.DenyTruncate || s.DenyIoctlOpen) || (s.Signals || s.Metadata) && !s.Notify || s.Inet && (s.Network || !s.Notify) || s.OwnAddress && !s.Inet {
			assert.Error(t, perr, "%+v", s)
			assert.Error(t, terr, "%+v", s)
			_, err := build(s)
			assert.Error(t, err, "%+v", s)
			continue
		}
		require.NoError(t, perr, "%+v", s)
		require.NoError(t, terr, "%+v", s)
		assert.NotEmpty(t, tab)
		fresh, err := program(s)
		require.NoError(t, err)
		assert.Equal(t, fresh, prog, "memoized program of %+v", s)
		if other, dup := seen[string(prog)]; dup {
			t.Errorf("%+v and %+v build the same program", s, other)
		}
		seen[string(prog)] = s
	}
}

// atFDCWD is AT_FDCWD as an int register (the kernel reads 32 bits).
var atFDCWD = func() uint64 { v := int32(unix.AT_FDCWD); return uint64(uint32(v)) }()

// TestProgramSetID: a call that would give a file set-ID bits is routed to
// the supervisor with user notification (chmod, its *at forms and fchmod
// always; creations are routed by their O_CREAT), and refused in
// the kernel without it; the same calls with plain modes, or a mode that
// an open without O_CREAT or O_TMPFILE ignores, go through.
func TestProgramSetID(t *testing.T) {
	const garbage = 0xdead_beef_0000_0000
	nr := func(name string) int32 {
		n, err := libseccomp.GetSyscallFromName(name)
		require.NoError(t, err)
		return int32(n)
	}
	notify, err := Program(Spec{Notify: true})
	require.NoError(t, err)
	kernel, err := Program(Spec{DenyIoctlOpen: true})
	require.NoError(t, err)
	for _, c := range []struct {
		name             string
		args             [6]uint64
		notified, kernel string
	}{
		{"fchmod", [6]uint64{3, 0o4755}, "notify", "EPERM"},
		{"fchmod", [6]uint64{3, 0o2755 | garbage}, "notify", "EPERM"},
		{"fchmod", [6]uint64{3, 0o755}, "notify", "allow"},
		{"chmod", [6]uint64{0, 0o4755}, "notify", "EPERM"},
		{"chmod", [6]uint64{0, 0o755}, "notify", "allow"},
		{"fchmodat", [6]uint64{3, 0, 0o2775}, "notify", "EPERM"},
		{"fchmodat2", [6]uint64{3, 0, 0o4700}, "notify", "EPERM"},
		{"creat", [6]uint64{0, 0o4755}, "notify", "EPERM"},
		{"mknod", [6]uint64{0, unix.S_IFREG | 0o4755}, "notify", "EPERM"},
		{"mknodat", [6]uint64{3, 0, unix.S_IFREG | 0o2755}, "notify", "EPERM"},
		{"open", [6]uint64{0, unix.O_WRONLY | unix.O_CREAT, 0o4755}, "notify", "EPERM"},
		{"openat", [6]uint64{3, 0, unix.O_RDWR | unix.O_TMPFILE, 0o2755}, "notify", "EPERM"},
		{"openat", [6]uint64{3, 0, unix.O_RDONLY, 0o4755}, "allow", "allow"},
		{"openat", [6]uint64{3, 0, unix.O_WRONLY | unix.O_CREAT, 0o644}, "notify", "allow"},
	} {
		assert.Equal(t, c.notified, actionName(run(t, notify, nr(c.name), c.args)), "%s %#o with notification", c.name, c.args)
		assert.Equal(t, c.kernel, actionName(run(t, kernel, nr(c.name), c.args)), "%s %#o without", c.name, c.args)
	}
}

// TestProgramDeniedIoctls: the denied ioctl requests are refused (EPERM)
// without a supervisor and notified with one, garbage in the upper 32 bits
// or not, and named; their neighbours are not. The btrfs requests are the
// kernel headers' (linux/btrfs.h) where the encoding is x86's.
func TestProgramDeniedIoctls(t *testing.T) {
	const garbage = 0xdead_beef_0000_0000
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		for got, want := range map[uint64]uint64{
			BtrfsIocSnapCreate: 0x50009401, BtrfsIocSubvolCreate: 0x5000940e, BtrfsIocSnapDestroy: 0x5000940f,
			BtrfsIocSnapCreateV2: 0x50009417, BtrfsIocSubvolCreateV2: 0x50009418, BtrfsIocSubvolSetflags: 0x4008941a,
			BtrfsIocSetReceivedSubvol: 0xc0c89425, BtrfsIocSnapDestroyV2: 0x5000943f,
		} {
			assert.Equal(t, want, got, "%s", DeniedIoctlName(got))
		}
	}
	ioctl, err := libseccomp.GetSyscallFromName("ioctl")
	require.NoError(t, err)
	names := map[string]bool{}
	for _, notify := range []bool{false, true} {
		prog, err := Program(Spec{Notify: notify})
		require.NoError(t, err)
		want := "EPERM"
		if notify {
			want = "notify"
		}
		for _, req := range []uint64{unix.TIOCSTI, unix.TIOCLINUX, UserfaultfdIocNew,
			BtrfsIocSnapCreate, BtrfsIocSubvolCreate, BtrfsIocSnapDestroy, BtrfsIocSnapCreateV2,
			BtrfsIocSubvolCreateV2, BtrfsIocSubvolSetflags, BtrfsIocSetReceivedSubvol, BtrfsIocSnapDestroyV2,
			unix.FS_IOC_SET_ENCRYPTION_POLICY, unix.FS_IOC_ADD_ENCRYPTION_KEY,
			unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unix.FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS} {
			name := DeniedIoctlName(req | garbage)
			assert.NotEmpty(t, name, "%#x", req)
			names[name] = true
			for _, r := range []uint64{req, req | garbage} {
				assert.Equal(t, want, actionName(run(t, prog, int32(ioctl), [6]uint64{1: r})), "ioctl %s %#x, notify=%v", name, r, notify)
			}
		}
		// BTRFS_IOC_CLONE (a reflink into a descriptor opened for
		// writing), BTRFS_IOC_SYNC, BTRFS_IOC_SUBVOL_GETFLAGS,
		// FS_IOC_GET_ENCRYPTION_POLICY.
		for _, req := range []uint64{0x40049409, 0x9408, 0x80089419, unix.FS_IOC_GET_ENCRYPTION_POLICY} {
			assert.Empty(t, DeniedIoctlName(req), "%#x", req)
			assert.Equal(t, "allow", actionName(run(t, prog, int32(ioctl), [6]uint64{1: req})), "ioctl %#x, notify=%v", req, notify)
		}
	}
	assert.Len(t, names, len(deniedIoctls), "one name each")
}
