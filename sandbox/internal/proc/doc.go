// Package proc reads what the kernel says of a process from outside it:
// /proc/PID/stat ([ReadStat]: parent, state, start time) and whether a pidfd's
// process still runs ([Alive]).
//
// It is shared by the runner's process tree (which walks and kills the
// command's processes) and the supervisor (which checks whether a signal or
// scheduling target belongs to the sandbox). It only reads: it must never
// signal, wait for or otherwise act on a process, never block (a pidfd is
// polled with a zero timeout), and it holds no state.
package proc
