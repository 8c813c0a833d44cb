package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// attached is the one command this process runs, for both of its faces
// (dsh-sandbox-run and landlock-run): readied before the command starts,
// so that nothing leaked to this process reaches it and what it leaves
// behind comes back to us (sandbox.Attach); termination signals, a
// terminal's resize and the timeout reach it (stopper); after it, every
// child left is killed.
type attached struct {
	reap     func()
	sigs     chan os.Signal
	cmd      *sandbox.Cmd
	done     chan struct{}
	timedOut chan bool
}

// attach readies this process for one command and starts catching the
// termination signals, which the command gets once it started.
func attach() (*attached, error) {
	reap, err := sandbox.Attach()
	if err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 8)
	// SIGWINCH too: the runner leads a process group of its own, so a
	// terminal's resize reaches the command only through us.
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, sigResize)
	return &attached{reap: reap, sigs: sigs}, nil
}

// start starts cmd, to be stopped by SIGTERM after timeout (0: never).
func (a *attached) start(cmd *sandbox.Cmd, timeout time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	a.cmd, a.done, a.timedOut = cmd, make(chan struct{}), make(chan bool, 1)
	go func() { a.timedOut <- stopper(cmd, a.sigs, timeout, a.done) }()
	return nil
}

// wait waits for the command started, kills and reaps whatever it left,
// and says whether its timeout fired.
func (a *attached) wait() (res *sandbox.Result, timedOut bool, err error) {
	res, err = a.cmd.Wait()
	a.reap()
	close(a.done)
	return res, <-a.timedOut, err
}
