// The session runner: a runner that makes the namespaces its commands share
// (user, UTS and, without network, net) once, and then forks a runner for
// each command it is asked for, which makes the rest (mount, IPC, pid) and
// goes on as a runner spawned alone would (runner_main). A command so pays
// neither the runner's execve nor the user and net namespaces' setup and
// teardown.
//
// Protocol (fd 3, SOCK_SEQPACKET, from the supervisor's NamespaceCache):
//   → SPEC_MAGIC "session" NETNS                     (once)
//   ← {"kind":"session","layers":{...}} or fail      (the namespaces made)
//   → SPEC_MAGIC "command" NFD CG UMASK ARGC argv.. env..   (per command)
//     with NFD + 1 + CG descriptors: the runner's fds 0..NFD-1 (stdin,
//     stdout, stderr, its control socket, the extra files, a transaction's
//     hold), the working directory (O_PATH), and with CG the command's
//     cgroup directory (cgroup v2) to clone the runner into
//   ← {"kind":"forked","pid":P,"cgroup":0|1} or fail
// The forked runner is the supervisor's child (CLONE_PARENT), so the
// supervisor reaps and signals it as it does a runner it spawned. The
// session runner itself never runs a command, never confines itself and
// holds nothing of a command once it forked its runner; it ends when its
// socket does.
//
// The forked runner is a raw clone, so glibc's cached thread id in it is the
// session runner's: it and the processes it makes must never call raise,
// abort or the pthread functions that use it (none does; fork corrects it
// in the runner's own children).

#include "runner_linux.h"

// dshr_session: this runner was forked by a session runner, in whose user
// (and UTS, net) namespaces it is; dshr_session_netns: whether the session
// was asked for a net namespace.
int dshr_session, dshr_session_netns;

#define SESSION_MAX_FDS 96
#define SESSION_REQ_MAX (2560 * 1024) // argv and environment: ARG_MAX is a quarter of an 8 MiB stack

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

struct clone_args_v2 {
	unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

// session_fail reports why a command's runner could not be forked, and
// keeps serving.
static void session_fail(int e, const char *op) {
	char msg[512];
	snprintf(msg, sizeof msg, "{\"kind\":\"fail\",\"errno\":%d,\"op\":\"%s\",\"detail\":\"session runner: %s: %s\"}", e, op, op, strerror(e));
	dshr_send_msg(msg);
}

// fork_runner clones the command's runner as the supervisor's child, into the
// cgroup cg when cg >= 0 (falling back to no group, *in_cgroup then 0).
static pid_t fork_runner(int cg, int *in_cgroup) {
	struct clone_args_v2 a;
	memset(&a, 0, sizeof a);
	a.flags = CLONE_PARENT;
	*in_cgroup = 0;
	if (cg >= 0) {
		a.flags |= CLONE_INTO_CGROUP;
		a.cgroup = (unsigned long long)cg;
		long p = syscall(SYS_clone3, &a, sizeof a);
		if (p >= 0) {
			*in_cgroup = 1;
			return (pid_t)p;
		}
		if (dshr_out_of_resources(errno)) return -1;
		a.flags = CLONE_PARENT;
		a.cgroup = 0;
	}
	long p = syscall(SYS_clone3, &a, sizeof a);
	// Before Linux 5.3, or a host filter that refuses clone3 (ENOSYS, or
	// EPERM in older container profiles): clone.
	if (p < 0 && !dshr_out_of_resources(errno)) p = syscall(SYS_clone, CLONE_PARENT, 0, NULL, NULL, 0);
	return (pid_t)p;
}

// child_fail reports on the runner's control socket, before it is in place
// as CTRL_FD, why the runner could not start (op failed with errno e), and
// ends it.
__attribute__((noreturn)) static void child_fail(int ctrl, const char *op, int e) {
	char msg[512];
	snprintf(msg, sizeof msg, "{\"kind\":\"fail\",\"errno\":%d,\"op\":\"%s\",\"detail\":\"%s: %s\"}", e, op, op, strerror(e));
	while (send(ctrl, msg, strlen(msg), MSG_NOSIGNAL) < 0 && errno == EINTR) {
	}
	_exit(125);
}

// place moves the n descriptors fds to 0..n-1 (from 3 on close-on-exec, as
// the constructor leaves a runner's) and closes every other. The received
// descriptors are all above 3 (0..3 were the session runner's own when they
// came), which are closed first; a target held by a descriptor still to be
// placed is moved out of the way, to the lowest free number, so that no
// more descriptors are needed than the runner is given (its RLIMIT_NOFILE
// may be just enough). It returns 0, or -1 with errno.
static int place(int *fds, int n) {
	for (int fd = 0; fd <= CTRL_FD; fd++) close(fd);
	for (int i = 0; i < n; i++) {
		if (fds[i] != i) {
			for (int k = i + 1; k < n; k++) {
				if (fds[k] != i) continue;
				int d = fcntl(i, F_DUPFD_CLOEXEC, 0);
				if (d < 0) return -1;
				close(i);
				fds[k] = d;
			}
			if (dup3(fds[i], i, O_CLOEXEC) < 0) return -1;
			close(fds[i]);
			fds[i] = i;
		}
		// Standard input, output and error stay open in the command; the
		// others are the runner's (it moves the extra files down itself).
		if (fcntl(i, F_SETFD, i > 2 ? FD_CLOEXEC : 0) < 0) return -1;
	}
	// Every fd above the runner's (none is expected: a stray one of the
	// session runner's would be).
	if (syscall(SYS_close_range, n, ~0U, 0) < 0) {
		for (int fd = n; fd < 65536; fd++) close(fd);
	}
	return 0;
}

// The session runner's argument area (its argv's strings), which each
// forked runner rewrites so that /proc/PID/cmdline shows its command, as a
// spawned runner's does.
static char *args_start;
static size_t args_len;

// set_cmdline writes argv into the argument area, NUL-separated, cut to its
// size, the rest NULs.
static void set_cmdline(char **argv) {
	if (!args_start || args_len == 0) return;
	size_t n = 0;
	for (int i = 0; argv[i] && n < args_len; i++) {
		size_t l = strlen(argv[i]) + 1;
		if (l > args_len - n) l = args_len - n;
		memcpy(args_start + n, argv[i], l);
		n += l;
	}
	memset(args_start + n, 0, args_len - n);
	args_start[args_len - 1] = 0;
}

// command_runner is the forked runner: it takes its descriptors, working
// directory, umask and environment from the request and becomes a runner.
__attribute__((noreturn)) static void command_runner(int *fds, int nfd, int cwd, int cg, mode_t mask, char **argv, char **envp,
                                                      void (*run)(char **)) {
	// The session runner is not dumpable; a runner started by execve is.
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (fchdir(cwd) < 0) child_fail(fds[CTRL_FD], "chdir to the working directory", errno);
	close(cwd);
	if (cg >= 0) close(cg);
	// (place keeps fds saying where each descriptor is, so a failure is
	// told on the control socket wherever it is then.)
	if (place(fds, nfd) < 0) child_fail(fds[CTRL_FD], "place the runner's descriptors", errno);
	setpgid(0, 0);
	umask(mask);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	extern char **environ;
	environ = envp;
	set_cmdline(argv);
	dshr_session = 1;
	run(argv);
	_exit(125);
}

void dshr_session_main(char **argv, void (*run)(char **)) {
	// The argument area: argv's strings, contiguous. The supervisor pads
	// it (argv[1], spaces) for the forked runners' command lines; it reads
	// as NULs here.
	int nargs = 0;
	while (argv[nargs]) nargs++;
	if (nargs > 0) {
		args_start = argv[0];
		args_len = (size_t)(argv[nargs - 1] + strlen(argv[nargs - 1]) + 1 - argv[0]);
		memset(args_start + strlen(argv[0]), 0, args_len - strlen(argv[0]));
	}
	static char buf[SESSION_REQ_MAX];
	// The first message: which namespaces.
	ssize_t n = dshr_recv_msg(buf, sizeof buf - 1);
	if (n <= 0) _exit(125);
	buf[n] = 0;
	const char *t1 = buf + strlen(buf) + 1, *t2 = t1 < buf + n ? t1 + strlen(t1) + 1 : buf + n;
	if (strcmp(buf, SPEC_MAGIC) != 0 || t2 >= buf + n || strcmp(t1, "session") != 0) dshr_fail("session runner: bad request");
	dshr_session_netns = atoi(t2);
	dshr_enter_session_namespaces(dshr_session_netns);
	if (!dshr_ns_user) dshr_fail("%s", dshr_ns_error[0] ? dshr_ns_error : "no user namespace");
	dshr_loopback_up();
	// It holds a user namespace's every capability: nothing but its
	// supervisor may look into it.
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) dshr_fail("session runner: set not dumpable: %s", strerror(errno));
	char msg[6000];
#define B(x) ((x) ? "true" : "false")
	snprintf(msg, sizeof msg, "{\"kind\":\"session\",\"layers\":{\"user\":%s,\"net\":%s,\"uts\":%s,\"ns_error\":", B(dshr_ns_user), B(dshr_ns_net),
	         B(dshr_ns_uts));
#undef B
	dshr_json_str(msg, sizeof msg - 2, dshr_ns_error);
	strcat(msg, "},\"detail\":");
	dshr_json_str(msg, sizeof msg - 2, dshr_reasons);
	strcat(msg, "}");
	if (dshr_send_msg(msg) < 0) _exit(0);
	for (;;) {
		union {
			char buf[CMSG_SPACE(SESSION_MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf - 1};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf, .msg_controllen = sizeof cbuf.buf};
		do {
			n = recvmsg(CTRL_FD, &mh, MSG_CMSG_CLOEXEC);
		} while (n < 0 && errno == EINTR);
		if (n <= 0) _exit(0);
		int fds[SESSION_MAX_FDS], nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
				if (nfds < SESSION_MAX_FDS)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		buf[n] = 0;
		static char *tok[MAX_TOKENS + 1];
		int ntok = 0, many = 0;
		for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
			if (ntok == MAX_TOKENS) {
				many = 1;
				break;
			}
			tok[ntok++] = p;
		}
		tok[ntok] = NULL;
		int nfd = ntok > 2 ? atoi(tok[2]) : -1, cg = ntok > 3 ? atoi(tok[3]) : 0, argc = ntok > 5 ? atoi(tok[5]) : -1;
		// The answer goes once every descriptor that came is closed
		// here: the supervisor may look the moment it reads it.
		int fail_errno = 0;
		const char *fail_op = NULL;
		pid_t p = -1;
		int in_cgroup = 0;
		if (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC) || many) {
			fail_errno = (mh.msg_flags & MSG_CTRUNC) ? EMFILE : E2BIG;
			fail_op = "receive a command";
		} else if (ntok < 6 || strcmp(tok[0], SPEC_MAGIC) != 0 || strcmp(tok[1], "command") != 0 || nfd < 4 || argc < 1 ||
		           argc > ntok - 6 || nfds != nfd + 1 + (cg ? 1 : 0)) {
			fail_errno = EINVAL;
			fail_op = "read a command";
		} else {
			p = fork_runner(cg ? fds[nfd + 1] : -1, &in_cgroup);
			if (p == 0) {
				// argv: the runner's name, then the command (tok[6..]);
				// the environment follows it.
				char **av = malloc((size_t)(argc + 2) * sizeof *av);
				if (!av) _exit(125);
				av[0] = (char *)RUNNER_ARG0;
				for (int i = 0; i < argc; i++) av[i + 1] = tok[6 + i];
				av[argc + 1] = NULL;
				command_runner(fds, nfd, fds[nfd], cg ? fds[nfd + 1] : -1, (mode_t)strtoul(tok[4], NULL, 8), av, tok + 6 + argc, run);
			}
			if (p < 0) {
				fail_errno = errno;
				fail_op = "fork the command's runner";
			}
		}
		for (int i = 0; i < nfds; i++) close(fds[i]);
		if (fail_op) {
			session_fail(fail_errno, fail_op);
		} else {
			char fm[96];
			snprintf(fm, sizeof fm, "{\"kind\":\"forked\",\"pid\":%d,\"cgroup\":%d}", (int)p, in_cgroup);
			dshr_send_msg(fm);
		}
	}
}
