// The seccomp program (received with the Landlock ruleset), its loading in
// the command's process with the listener's way to the supervisor, and the
// Landlock signal scope.

#include "runner_linux.h"

// dshr_recv_bpf receives the seccomp program, with the Landlock ruleset fd
// attached (SCM_RIGHTS) when there is one.
ssize_t dshr_recv_bpf(char *buf, size_t cap, int *ruleset) {
	int nfds, trunc;
	*ruleset = -1;
	ssize_t n = dshr_recv_fds(buf, cap, ruleset, 1, &nfds, &trunc);
	if (n > 0 && trunc) dshr_fail_sys("receive the Landlock ruleset", EMFILE);
	return n;
}

// The seccomp program, received in runner_main and loaded by dshr_load_filter.
char dshr_bpf[SPEC_MAX];
char *dshr_bpf_g = dshr_bpf;
ssize_t dshr_blen_g;

// dshr_nest_signal_scope puts the command's process in a Landlock domain nested
// in the runner's, whose only restriction is the signal scope (ABI 6): the
// command can signal its own processes, but no longer the relay and the
// keeper, which stay in the outer domain and must outlive whatever it does
// (without a pid namespace they are visible to it and share its uid). The
// supervisor keeps the keeper out of reach below ABI 6 (signal_linux.go).
//
// A layer that handles no filesystem right still takes part in Landlock's
// check of a cross-directory link (which then fails with EXDEV): this one
// handles LANDLOCK_ACCESS_FS_REFER and grants it beneath "/", so it leaves
// links and renames to the outer layer.
void dshr_nest_signal_scope(void) {
	const unsigned long long refer = 1ULL << 13; // LANDLOCK_ACCESS_FS_REFER
	struct {
		unsigned long long handled_access_fs, handled_access_net, scoped;
	} attr = {refer, 0, 1ULL << 1 /* LANDLOCK_SCOPE_SIGNAL */};
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (fd < 0) dshr_fail_sys("landlock: signal scope", errno);
	struct {
		unsigned long long allowed_access;
		int parent_fd;
	} __attribute__((packed)) pb = {.allowed_access = refer, .parent_fd = open("/", O_PATH | O_CLOEXEC)};
	if (pb.parent_fd < 0 || syscall(SYS_landlock_add_rule, fd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) < 0)
		dshr_fail_sys("landlock: signal scope", errno);
	close(pb.parent_fd);
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0) dshr_fail_sys("landlock: signal scope", errno);
	close(fd);
}

// The listener's way to the supervisor. The command's process cannot send
// it once the filter is loaded (sendmsg is routed to the very supervisor
// that does not hold the listener yet), and the supervisor cannot take it
// with pidfd_getfd where the host forbids that call (Docker's default
// seccomp profile allows it only with CAP_SYS_PTRACE). So a helper process
// that shares the command's descriptor table (clone with CLONE_FILES), made
// before the filter is loaded and so not under it, sends it with SCM_RIGHTS
// over the control socket and waits for the acknowledgement; the command's
// process then closes it and execs. (A thread would do, but pthread_create
// is wrapped in the CLI, and a raw thread shares errno with its creator.)
// It returns 0, the errno of a refused sendmsg, or 255 when the supervisor
// did not acknowledge (gone).
static int send_listener(int lfd, int mount_view) {
	char lm[384], ack[64];
	// The supervisor learns whether the command has a mount view now,
	// before any notification: without one it refuses what Landlock cannot
	// see (ioctl-only opens, truncation below ABI 3, openat2).
	snprintf(lm, sizeof lm, "{\"kind\":\"listener\",\"fd\":-1,\"mount_view\":%d,\"netns\":%d,\"ipcns\":%d,\"caches\":\"%s\"}",
	         mount_view ? 1 : 0, dshr_ns_net ? 1 : 0, dshr_ns_ipc ? 1 : 0, dshr_caches);
	struct iovec iov = {.iov_base = lm, .iov_len = strlen(lm)};
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &lfd, sizeof(int));
	ssize_t r;
	do {
		r = sendmsg(CTRL_FD, &mh, MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	if (r < 0) return errno > 0 && errno < 255 ? errno : 255;
	return dshr_recv_msg(ack, sizeof ack - 1) > 0 ? 0 : 255;
}

// dshr_load_filter is step 5, in the command's process before it execs: it loads
// the seccomp filter and, with user notification, hands the listener to the
// supervisor (see send_listener). dshr_fail reports to the supervisor directly
// (send(2) is never routed).
void dshr_load_filter(int notify, int mount_view) {
	struct sock_fprog prog = {.len = (unsigned short)(dshr_blen_g / sizeof(struct sock_filter)), .filter = (struct sock_filter *)dshr_bpf_g};
	int np[2] = {-1, -1};
	pid_t sender = -1;
	if (notify) {
		if (pipe2(np, O_CLOEXEC) < 0) dshr_fail_sys("pipe", errno);
		sender = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (sender < 0) dshr_fail_sys("clone the listener's sender", errno);
		if (sender == 0) {
			int lfd;
			ssize_t r;
			do {
				r = read(np[0], &lfd, sizeof lfd);
			} while (r < 0 && errno == EINTR);
			_exit(r == (ssize_t)sizeof lfd && lfd >= 0 ? send_listener(lfd, mount_view) : 255);
		}
	}
	long lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
	int load_errno = errno;
	if (notify) {
		int n = (int)lfd;
		while (write(np[1], &n, sizeof n) < 0 && errno == EINTR) {
		}
		int st = 0;
		while (waitpid(sender, &st, 0) < 0 && errno == EINTR) {
		}
		close(np[0]);
		close(np[1]);
		if (lfd >= 0) {
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
			if (code == 255) _exit(125); // the supervisor is gone
			// The kernel refuses to pass a descriptor when too many are
			// in flight (ETOOMANYREFS: on Linux 6.1, measured, every
			// descriptor the user has in flight, in any process, counts
			// against the sender's RLIMIT_NOFILE): out of resources.
			if (code != 0) dshr_fail_sys("seccomp: pass the listener", code);
		}
	}
	if (lfd < 0) {
		if (dshr_out_of_resources(load_errno)) dshr_fail_sys("seccomp: load filter", load_errno);
		dshr_fail("seccomp: load filter: %s", strerror(load_errno));
	}
	if (notify) close((int)lfd);
	errno = 0;
	if (syscall(SYS_io_uring_setup, 0, NULL) != -1 || errno != EPERM)
		dshr_fail("seccomp self-test: io_uring_setup was not denied (%s)", strerror(errno));
}

