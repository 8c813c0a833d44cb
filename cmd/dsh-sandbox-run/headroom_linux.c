// Thread exhaustion ends dsh-sandbox-run in one line, not a crash dump.
//
// The Go runtime cannot survive a failed thread creation: when the process or
// pids limit is reached (ulimit -u, cgroup pids.max), runtime/cgo retries for
// a while and then aborts with a register and goroutine dump, where every
// setup failure of the CLI owes one line and exit 125. The link wraps
// pthread_create (-Wl,--wrap=pthread_create, see headroom_linux.go): the
// wrapper retries like runtime/cgo does, and when the host still refuses it
// says so in one line and exits 125. Nothing is lost by exiting: the runner
// kills the command's tree when the supervisor's control socket closes. A
// success costs nothing; runner re-executions of this binary never start the
// Go runtime or a thread.

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int __real_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

// said_code is the exit code of the one line the CLI itself has written
// (dsh_said_line), -1 before: a thread that fails after it ends the process
// with that code and adds no line of its own.
static int said_code = -1;

void dsh_said_line(int code) { __atomic_store_n(&said_code, code, __ATOMIC_SEQ_CST); }

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
	int err = 0;
	for (int tries = 0; tries < 20; tries++) {
		err = __real_pthread_create(t, attr, fn, arg);
		if (err != EAGAIN) return err;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (tries + 1) * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	// One line, even when several threads fail at once, or after the CLI
	// said its own: the first says it and exits; the others wait for that
	// exit.
	int code = __atomic_load_n(&said_code, __ATOMIC_SEQ_CST);
	if (code >= 0) _exit(code);
	static int said;
	if (__atomic_exchange_n(&said, 1, __ATOMIC_SEQ_CST))
		for (;;) pause();
	char msg[256];
	int n = snprintf(msg, sizeof msg,
	                 "dsh-sandbox-run: cannot create a thread: %s: the process or pids limit (ulimit -u, cgroup pids.max) is reached\n",
	                 strerror(err));
	if (n > 0) {
		ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
		(void)w;
	}
	_exit(125);
}
