// Package testtime scales the deadlines of this module's tests to the
// machine they run on.
//
// A test that gives a command 300 ms before a timeout fires assumes the
// command gets somewhere in 300 ms. Under QEMU's TCG (make vm-test) a process
// starts ~20x slower than on the host, so such a test would fail for the
// machine, not for the code. make vm-test sets DSH_TEST_TIME_SCALE and every
// deadline that stands for "the command had enough time" goes through Scale;
// deadlines that stand for "this must not happen before" are not scaled where
// a larger value would weaken the check.
package testtime
