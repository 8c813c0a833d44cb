// The sandbox runner: applies a policy prepared by the supervisor, starts the
// command, and stays with it as its init. It runs from an ELF constructor, so
// a runner process never starts the Go runtime (the cost of a runner is an
// execve of this binary, not a second Go program start). See doc.go for the
// process model and the order of the steps.
//
// Protocol (fd 3, SOCK_SEQPACKET): the supervisor sends a spec (NUL-separated
// tokens) and, when confining, the seccomp BPF program with the Landlock
// ruleset fd attached. The runner answers with JSON messages: init (the pid
// namespace's init pid), listener (the seccomp listener itself, attached
// with SCM_RIGHTS by a helper of the command's process, then "ack"; and
// mount_view and netns, 0 or 1), netlisten (an egress listener's fd number,
// taken by the supervisor with pidfd_getfd, then "ack"), keeper (the inner
// keeper's pid, without a pid namespace), ready, fail, execfail (the
// command's execve failed), exit;
// a fail message carries the errno ("errno", "op") when a call failed, so
// that running out of resources is told from a host that cannot confine. The
// command is argv[1..]; the spec's "extra" files are the runner's fds 4..,
// and the command's 3.. (moved down right before execve).
//
// This file: the constructor, runner_main, and the spec's tokens and options
// (runner_linux.h lists the tokens and the files).

#include "runner_linux.h"

static void cloexec_from(int from) {
	if (syscall(SYS_close_range, from, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
	DIR *d = opendir("/proc/self/fd");
	if (!d) return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (fd >= from && fd != dirfd(d)) fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

// Spec tokens.
char *dshr_tok[MAX_TOKENS];
int dshr_ntok;

int dshr_opt(const char *key) {
	for (int i = 1; i + 1 < dshr_ntok && strcmp(dshr_tok[i], SPEC_OPS) != 0; i += 2)
		if (strcmp(dshr_tok[i], key) == 0) return atoi(dshr_tok[i + 1]);
	return 0;
}

const char *dshr_opt_str(const char *key) {
	for (int i = 1; i + 1 < dshr_ntok && strcmp(dshr_tok[i], SPEC_OPS) != 0; i += 2)
		if (strcmp(dshr_tok[i], key) == 0) return dshr_tok[i + 1];
	return "";
}

// nextra is the number of the command's extra files: the runner's fds 4..
static int nextra;

// dshr_close_extra closes the runner's copies of the command's extra files, in a
// process that does not start the command.
void dshr_close_extra(void) {
	for (int i = 0; i < nextra; i++) close(CTRL_FD + 1 + i);
}

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

// join_cgroup moves the runner into the command's cgroup (v1) by writing "0"
// to the group's tasks file in each hierarchy: it moves the calling thread
// alone, without the cgroup threadgroup rwsem whose write side waits for an
// RCU grace period (limits.Group.JoinFiles). The runner is one thread here
// and has forked nothing, so it and everything of the command are inside.
static void join_cgroup(const int *fds, int nfds, int trunc) {
	if (trunc) dshr_fail_sys("receive the command's cgroup files", EMFILE);
	int want = dshr_opt(KEY_CGJOIN);
	if (want != nfds) dshr_fail("runner: %d cgroup files announced, %d received", want, nfds);
	for (int i = 0; i < nfds; i++) {
		ssize_t w;
		do {
			w = write(fds[i], "0", 1);
		} while (w < 0 && errno == EINTR);
		if (w != 1) dshr_fail_sys("join the command's cgroup", w < 0 ? errno : EIO);
		close(fds[i]);
	}
}

// read_spec receives one part of the spec into spec (with the command's
// cgroup files when cgfds is not NULL) and splits it into dshr_tok.
static void read_spec(char *spec, size_t cap, int *cgfds, int *ncgfds, int *cgtrunc) {
	ssize_t n = cgfds ? dshr_recv_fds(spec, cap - 1, cgfds, MAX_CGJOIN, ncgfds, cgtrunc) : dshr_recv_msg(spec, cap - 1);
	if (n <= 0) _exit(125);
	spec[n] = 0;
	dshr_ntok = 0;
	for (char *p = spec; p < spec + n; p += strlen(p) + 1) {
		if (dshr_ntok == MAX_TOKENS) dshr_fail("runner: spec has too many tokens");
		dshr_tok[dshr_ntok++] = p;
	}
	if (dshr_ntok < 1 || strcmp(dshr_tok[0], SPEC_MAGIC) != 0) dshr_fail("runner: bad spec");
}

static void runner_main(char **argv) {
	static char spec[SPEC_MAX];
	int cgfds[MAX_CGJOIN], ncgfds, cgtrunc;
	char **cmd = argv + 1;
	// The spec's first part, sent as soon as the runner is spawned, says
	// what needs only the mode: the cgroup to join (its files come with
	// it), the namespaces, the number of extra files. The runner makes
	// them while the supervisor prepares the policy, which the second part
	// carries.
	read_spec(spec, sizeof spec, cgfds, &ncgfds, &cgtrunc);
	if (!cmd[0]) dshr_fail("runner: no command");
	nextra = dshr_opt(KEY_EXTRA);
	if (nextra < 0 || nextra > 64) dshr_fail("runner: bad number of extra files");
	for (int i = 0; i < nextra; i++)
		if (fcntl(CTRL_FD + 1 + i, F_GETFD) < 0) dshr_fail("runner: extra file %d (fd %d) is not open", i, CTRL_FD + 1 + i);
	int confine = dshr_opt(KEY_CONFINE), userns = dshr_opt(KEY_USERNS), netns = dshr_opt(KEY_NETNS);
	// Join the group before anything is forked or unshared. (A runner
	// that fails from here on leaves the supervisor's next send failing:
	// it then reads why from the socket.)
	join_cgroup(cgfds, ncgfds, cgtrunc);
	// 0. Namespaces (forked by a session runner: the rest of them).
	if (dshr_session && (!confine || !userns || netns != dshr_session_netns)) dshr_fail("runner: the spec disagrees with its session");
	if (confine && userns) dshr_setup_namespaces(netns);
	if (confine) dshr_loopback_up();
	// The second part: the whole spec, which must agree with the first.
	read_spec(spec, sizeof spec, NULL, NULL, NULL);
	if (dshr_opt(KEY_CONFINE) != confine || dshr_opt(KEY_USERNS) != userns || dshr_opt(KEY_NETNS) != netns || dshr_opt(KEY_EXTRA) != nextra)
		dshr_fail("runner: the spec disagrees with its first part");
	int ops = 0;
	while (ops < dshr_ntok && strcmp(dshr_tok[ops], SPEC_OPS) != 0) ops++;

	int mount_view = 0, fresh_proc = 0, landlock = 0, notify = 0, ruleset = -1;
	ssize_t blen = confine ? dshr_recv_bpf(dshr_bpf, sizeof dshr_bpf, &ruleset) : 0;
	if (confine) {
		// One program, or two (the second, bpf2 bytes at the end, routes
		// metadata changes for a command without a mount view; picked
		// below).
		ssize_t blen2 = dshr_opt(KEY_BPF2);
		if (blen <= 0 || blen2 < 0 || blen2 >= blen || blen % sizeof(struct sock_filter) || blen2 % sizeof(struct sock_filter))
			dshr_fail("runner: bad seccomp program");
		if (dshr_opt(KEY_LANDLOCK) && ruleset < 0) dshr_fail("runner: no Landlock ruleset");
		dshr_egress_listeners();
		// 1. Mount view.
		if (dshr_ns_mount) {
			char cwd[4096];
			int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
			mount_view = dshr_apply_mounts(ops + 1, &fresh_proc, ruleset);
			// Re-enter the working directory so relative paths use the new mounts.
			if (have_cwd && chdir(cwd) < 0) dshr_fail("chdir %s: %s", cwd, strerror(errno));
		}
		if (!mount_view && !dshr_opt(KEY_LANDLOCK))
			dshr_fail("no filesystem confinement is possible on this host (%s%s%s%s%s)", dshr_ns_error, dshr_ns_error[0] ? "; " : "",
			     dshr_opt_str(KEY_WHY), dshr_reasons[0] ? "; " : "", dshr_reasons);
		if (!mount_view && dshr_opt(KEY_LANDLOCK)) dshr_cache_env();
		// A deny-read path that only the mount view can hide (one in a
		// writable root) fails closed without it.
		if (!mount_view && dshr_opt_str(KEY_NEEDVIEW)[0]) {
			if (!dshr_ns_error[0] && !dshr_reasons[0]) dshr_fail("%s", dshr_opt_str(KEY_NEEDVIEW));
			dshr_fail("%s (no mount view: %s%s%s)", dshr_opt_str(KEY_NEEDVIEW), dshr_ns_error, dshr_ns_error[0] && dshr_reasons[0] ? "; " : "", dshr_reasons);
		}
		// 2. Capabilities. 3. no_new_privs.
		dshr_drop_capabilities();
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) dshr_fail("set no_new_privs: %s", strerror(errno));
		// 4. Landlock, prepared by the supervisor as a ruleset fd.
		if (dshr_opt(KEY_LANDLOCK)) {
			if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) dshr_fail("landlock_restrict_self: %s", strerror(errno));
			close(ruleset);
			if (dshr_opt(KEY_LLSELFTEST)) {
				int fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC);
				if (fd >= 0) dshr_fail("landlock self-test: a write outside the policy was allowed");
				if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) dshr_fail_sys("landlock self-test", errno);
				if (errno != EACCES) dshr_fail("landlock self-test: expected EACCES, got %s", strerror(errno));
			}
			landlock = 1;
		}
		// 5. seccomp: loaded by the command's process alone, after the fork
		// below (dshr_load_filter), so that the runner's own processes (relay,
		// keeper, init) can always signal and kill the tree, the
		// supervisor gone or not: calls the filter routes to the supervisor
		// fail with ENOSYS once its listener is closed.
		// Without a mount view, the program that routes metadata changes
		// to the supervisor (the listener message says which was loaded).
		if (blen2 > 0 && !mount_view) {
			dshr_bpf_g = dshr_bpf + (blen - blen2);
			dshr_blen_g = blen2;
		} else {
			dshr_blen_g = blen - blen2;
		}
		notify = dshr_opt(KEY_NOTIFY);
	}
	// 7. Start the command in a new session; stay as its init.
	dshr_pid1 = getpid() == 1;
	if (!dshr_pid1) {
		// No pid namespace: a relay (this process) and an inner keeper,
		// both child subreapers, so that no single kill from outside frees
		// the command's tree (see dshr_relay).
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) dshr_fail("set child subreaper: %s", strerror(errno));
		sigset_t all, prev;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &prev);
		pid_t outer = getpid();
		pid_t keeper = fork();
		if (keeper < 0) dshr_fail_sys("fork", errno);
		if (keeper > 0) {
			dshr_close_extra();
			dshr_relay(keeper, 1);
		}
		if (prctl(PR_SET_PDEATHSIG, keeper_death_signal, 0, 0, 0) < 0) dshr_fail("set parent-death signal: %s", strerror(errno));
		if (getppid() != outer) _exit(125);
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) dshr_fail("set child subreaper: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &prev, NULL);
		// The supervisor learns the keeper before the command can stop or
		// kill anything (it may run before "ready").
		char km[64];
		snprintf(km, sizeof km, "{\"kind\":\"keeper\",\"pid\":%d}", (int)getpid());
		if (dshr_send_msg(km) < 0) _exit(125);
	}
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, keeper_death_signal);
	sigaddset(&mask, kill_tree_signal);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&mask, forwarded[i]);
	sigprocmask(SIG_BLOCK, &mask, &old);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) dshr_fail_sys("signalfd", errno);
	// A close-on-exec pipe tells whether the command's execve succeeded
	// (EOF) or failed (its errno): a command that cannot be started is
	// reported as such, not as an exit status.
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) dshr_fail_sys("pipe", errno);
	// Resource limit without a cgroup: RLIMIT_NPROC, which counts the
	// processes of the real uid in this user namespace (ucounts, Linux
	// 5.14), so per command only inside one the runner made; uid 0 is
	// exempt from it. Set before the command's fork, inherited by all of it.
	int nproc = 0;
	if (dshr_opt(KEY_NPROC) > 0 && dshr_ns_user && getuid() != 0) {
		// In a session's user namespace it would count every command
		// of the session (the supervisor never asks for it there).
		if (dshr_session) dshr_fail("runner: a process limit by RLIMIT_NPROC would count every command of the session");
		struct rlimit rl = {(rlim_t)dshr_opt(KEY_NPROC), (rlim_t)dshr_opt(KEY_NPROC)};
		nproc = setrlimit(RLIMIT_NPROC, &rl) == 0;
	}
	// Nothing more is taken from this process (the listener goes from the
	// command's own process, by SCM_RIGHTS).
	dshr_seal_process();
	dshr_child = fork();
	if (dshr_child < 0) dshr_fail_sys("fork", errno);
	dshr_leader_unreaped = dshr_child > 0;
	if (dshr_child == 0) {
		close(ep[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		setsid();
		if (confine && !dshr_pid1 && dshr_opt(KEY_SCOPESIG)) dshr_nest_signal_scope();
		if (confine) dshr_load_filter(notify, mount_view);
		// The extra files, the runner's fds 4.., become the command's 3..
		// (dup2 clears close-on-exec on the copy; the last original keeps
		// it, as does every other fd above 2).
		for (int i = 0; i < nextra; i++) {
			if (dup2(CTRL_FD + 1 + i, CTRL_FD + i) < 0) {
				int e = errno;
				while (write(ep[1], &e, sizeof e) < 0 && errno == EINTR) {
				}
				_exit(126);
			}
		}
		const char *path = dshr_opt_str(KEY_PATH);
		if (path[0])
			execv(path, cmd);
		else
			execvp(cmd[0], cmd);
		int e = errno;
		while (write(ep[1], &e, sizeof e) < 0 && errno == EINTR) {
		}
		_exit(e == ENOENT ? 127 : 126);
	}
	close(ep[1]);
	dshr_close_extra();
	int exec_errno = 0;
	ssize_t er;
	do {
		er = read(ep[0], &exec_errno, sizeof exec_errno);
	} while (er < 0 && errno == EINTR);
	close(ep[0]);
	if (er == (ssize_t)sizeof exec_errno) {
		while (waitpid(dshr_child, NULL, 0) < 0 && errno == EINTR) {
		}
		char detail[1024], em[2400];
		snprintf(detail, sizeof detail, "%s: %s", dshr_opt_str(KEY_PATH)[0] ? dshr_opt_str(KEY_PATH) : cmd[0], strerror(exec_errno));
		snprintf(em, sizeof em, "{\"kind\":\"execfail\",\"errno\":%d,\"detail\":", exec_errno);
		dshr_json_str(em, sizeof em - 2, detail);
		strcat(em, "}");
		dshr_send_msg(em);
		_exit(exec_errno == ENOENT ? 127 : 126);
	}
	char msg[6000];
#define B(x) ((x) ? "true" : "false")
	snprintf(msg, sizeof msg,
	         "{\"kind\":\"ready\",\"layers\":{\"user\":%s,\"mount\":%s,\"pid\":%s,\"net\":%s,\"ipc\":%s,\"uts\":%s,"
	         "\"mount_view\":%s,\"fresh_proc\":%s,\"landlock\":%s,\"seccomp\":%s,\"notify\":%s,\"nproc\":%s,\"cmd_pid\":%d,\"ns_error\":",
	         B(dshr_ns_user), B(dshr_ns_mount), B(dshr_ns_pid), B(dshr_ns_net), B(dshr_ns_ipc), B(dshr_ns_uts), B(mount_view), B(fresh_proc), B(landlock),
	         B(confine), B(notify), B(nproc), (int)dshr_child);
#undef B
	dshr_json_str(msg, sizeof msg - 2, dshr_ns_error);
	strcat(msg, "},\"caches\":");
	dshr_json_str(msg, sizeof msg - 2, dshr_caches);
	strcat(msg, ",\"detail\":");
	dshr_json_str(msg, sizeof msg - 2, dshr_reasons);
	strcat(msg, "}");
	if (dshr_send_msg(msg) < 0) {
		dshr_kill_tree();
		_exit(125);
	}
	dshr_supervise(sfd);
}

// dsh_sandbox_runner runs before the Go runtime when this process was started
// as a runner (argv[0] "dsh-sandbox-runner" and _DSH_SANDBOX_RUNNER=1) or a
// session runner (_DSH_SANDBOX_RUNNER=session), and returns at once otherwise.
__attribute__((constructor)) static void dsh_sandbox_runner(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 1 || !argv || !argv[0] || strcmp(argv[0], RUNNER_ARG0) != 0) return;
	const char *m = getenv(RUNNER_ENV);
	if (!m) return;
	int session = strcmp(m, RUNNER_ENV_SESSION) == 0;
	if (!session && strcmp(m, "1") != 0) return;
	unsetenv(RUNNER_ENV);
	cloexec_from(CTRL_FD);
	if (session) dshr_session_main(argv, runner_main);
	runner_main(argv);
	_exit(125);
}
