//go:build linux

package landlock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Landlock system calls the supervisor makes (the runner, in C, makes
// landlock_restrict_self). go-landlock's syscall
// package is not used because it links libpsx (which wraps pthread_create in
// a cgo binary) for process-wide enforcement this project does not need.

func getABI() (int, error) {
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rulesetAttrSize is the size of struct landlock_ruleset_attr that ABI v
// understands; passing the smallest sufficient size keeps older kernels happy.
func rulesetAttrSize(v int) uintptr {
	switch {
	case v < 4:
		return 8
	case v < 6:
		return 16
	case v < 10:
		return 24
	}
	return unsafe.Sizeof(rulesetAttr{})
}

// rulesetAttr is struct landlock_ruleset_attr as of ABI 10. It is declared
// here rather than taken from golang.org/x/sys/unix, whose versions that have
// the later fields (and the constants below) require Go 1.26: the module's go
// line stays at the oldest Go that builds it.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
	quietAccessFS    uint64
	quietAccessNet   uint64
	quietScoped      uint64
}

// Access rights of later ABIs, from the kernel's uapi/linux/landlock.h.
const (
	accessFSResolveUnix     = 1 << 16 // LANDLOCK_ACCESS_FS_RESOLVE_UNIX (ABI 9)
	accessNetBindUDP        = 1 << 2  // LANDLOCK_ACCESS_NET_BIND_UDP (ABI 10)
	accessNetConnectSendUDP = 1 << 3  // LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP (ABI 10)
)

func createRuleset(attr *rulesetAttr, size uintptr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func addPathBeneath(rulesetFD int, attr *unix.LandlockPathBeneathAttr) error {
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// netPortAttr is struct landlock_net_port_attr (ABI 4).
type netPortAttr struct {
	allowed uint64
	port    uint64
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT.
const ruleNetPort = 2

func addNetPort(rulesetFD int, attr *netPortAttr) error {
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), ruleNetPort,
		uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
