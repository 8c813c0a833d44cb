//go:build linux

// Command racer races the supervisor's pre-denial of a path, as a command
// determined to plant a file at a protected path that does not exist would:
// one thread keeps flipping a path buffer between DECOY and TARGET (names of
// the same length) while another keeps calling open(buffer, O_CREAT) on it,
// so that the supervisor may read DECOY and the kernel then create TARGET.
//
//	racer TARGET DECOY SECONDS
//
// It prints "won" and exits 0 once it created TARGET, or prints "lost" and
// exits 1 after SECONDS. It does not link the sandbox.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 4 || len(os.Args[1]) != len(os.Args[2]) {
		fmt.Fprintln(os.Stderr, "usage: racer TARGET DECOY SECONDS (TARGET and DECOY of the same length)")
		os.Exit(2)
	}
	target, decoy := os.Args[1], os.Args[2]
	secs, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "racer: SECONDS:", err)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(2, runtime.NumCPU()))
	buf := make([]byte, len(target)+1) // NUL-terminated, flipped in place
	copy(buf, decoy)
	var stop atomic.Bool
	go func() {
		runtime.LockOSThread()
		for !stop.Load() {
			for i := 0; i < 64; i++ {
				copy(buf, target)
				copy(buf, decoy)
			}
		}
	}()
	cwd := unix.AT_FDCWD // a variable: the constant is negative
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(deadline) {
		p := unsafe.Pointer(&buf[0])
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(cwd), uintptr(p),
			uintptr(unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC), 0o644, 0, 0)
		runtime.KeepAlive(buf)
		if errno != 0 {
			continue
		}
		var got, want unix.Stat_t
		created := unix.Fstat(int(fd), &got) == nil && unix.Lstat(target, &want) == nil && got.Ino == want.Ino && got.Dev == want.Dev
		if created {
			unix.Write(int(fd), []byte("planted\n"))
		}
		unix.Close(int(fd))
		if created {
			stop.Store(true)
			fmt.Println("won")
			os.Exit(0)
		}
		unix.Unlink(decoy)
	}
	stop.Store(true)
	fmt.Println("lost")
	os.Exit(1)
}
