#!/usr/bin/env bash
# The per-command floor of a runner that outlives its commands (issue 30's next design): a C
# program (below) whose zygote makes user, mount, net, ipc and uts namespaces and MOUNTS
# read-only bind mounts once, then per command forks a child with pid, mount and ipc
# namespaces of its own, a fresh /proc, an init, and a command process that applies
# no_new_privs, Landlock and a seccomp filter with a listener (handed over by SCM_RIGHTS) and
# execs `bash -c true`. It runs ROUNDS such commands interleaved with bubblewrap's upstream
# profile running the same command, and prints one table: the median of each, and the CPU per
# command (the zygote's and its children's; bwrap's children's), with their ratios to bwrap.
# What a supervisor does per command (the policy, the cgroup, the notifier, the audit) must
# fit in the difference.
#
# Usage: bench/session-floor.sh
# Environment: ROUNDS (300), MOUNTS (100: about a default policy's mount view), CC (cc).
set -euo pipefail

die() { echo "session-floor.sh: $*" >&2; exit 1; }
rounds="${ROUNDS:-300}"
mounts="${MOUNTS:-100}"
case "$rounds" in '' | *[!0-9]* | 0*) die "ROUNDS must be a positive integer (got '$rounds')" ;; esac
case "$mounts" in '' | *[!0-9]*) die "MOUNTS must be a non-negative integer (got '$mounts')" ;; esac
cc="${CC:-cc}"
command -v "$cc" >/dev/null 2>&1 || die "missing C compiler: $cc"
command -v bwrap >/dev/null 2>&1 || die "missing tool: bwrap (make bench-deps)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/ws" "$work/scratch"
cat > "$work/session-floor.c" <<'C'
// session-floor: the per-command floor of a runner that outlives its commands.
// A zygote child makes user, mount, net, ipc and uts namespaces and MOUNTS
// read-only bind mounts once; per command it forks a child that unshares pid,
// mount and ipc namespaces, whose init mounts a fresh /proc and whose command
// process applies no_new_privs, Landlock (write rights under /tmp and /dev
// only) and a seccomp filter with a listener, hands the listener to the
// zygote by SCM_RIGHTS and execs bash -c true. The parent times ROUNDS such
// commands interleaved with bubblewrap's upstream profile running the same
// bash -c true in WS, and prints each one's median and CPU per command.
//
// Usage: session-floor ROUNDS MOUNTS WS SCRATCH (an empty directory, for the
// bind mounts' points: its caller removes it)
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(int who) {
	struct rusage r;
	getrusage(who, &r);
	return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static void die(const char *what) {
	perror(what);
	exit(1);
}

static void write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) die(path);
	close(fd);
}

static void send_fd(int sock, int fd) {
	char c = 'l', cb[CMSG_SPACE(sizeof(int))];
	struct iovec io = {&c, 1};
	memset(cb, 0, sizeof cb);
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	if (sendmsg(sock, &m, 0) != 1) die("send the listener");
}

static int recv_fd(int sock) {
	char c, cb[CMSG_SPACE(sizeof(int))];
	struct iovec io = {&c, 1};
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb};
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1) return -1;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (!h) return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(h), sizeof fd);
	return fd;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

// zygote serves one command per byte read from req, answering on rep.
static void zygote(int req, int rep, int mounts, const char *base) {
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64];
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0) die("unshare");
	snprintf(map, sizeof map, "%u %u 1", uid, uid);
	write_file("/proc/self/uid_map", map);
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1", gid, gid);
	write_file("/proc/self/gid_map", map);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) die("make / private");
	for (int i = 0; i < mounts; i++) {
		char d[4096];
		snprintf(d, sizeof d, "%s/%d", base, i);
		if (mkdir(d, 0755) < 0 || mount(d, d, NULL, MS_BIND, NULL) < 0 || mount(NULL, d, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
			die("bind mount");
	}
	struct landlock_ruleset_attr ra = {.handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG |
	                                                        LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
	                                                        LANDLOCK_ACCESS_FS_REMOVE_DIR};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
	if (rs < 0) die("landlock_create_ruleset");
	const char *rw[] = {"/tmp", "/dev"};
	for (int i = 0; i < 2; i++) {
		struct landlock_path_beneath_attr pb = {.allowed_access = ra.handled_access_fs, .parent_fd = open(rw[i], O_PATH | O_CLOEXEC)};
		if (pb.parent_fd < 0 || syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) die("landlock_add_rule");
		close(pb.parent_fd);
	}
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mkdir, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) die("socketpair");
	double cpu0 = cpu_ms(RUSAGE_CHILDREN) + cpu_ms(RUSAGE_SELF);
	char c;
	while (read(req, &c, 1) == 1) {
		pid_t child = fork();
		if (child < 0) die("fork");
		if (child == 0) {
			if (unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) < 0) die("unshare pid");
			pid_t init = fork();
			if (init == 0) {
				if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) die("mount proc");
				pid_t cmd = fork();
				if (cmd == 0) {
					setsid();
					if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs");
					if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) die("landlock_restrict_self");
					int lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
					if (lfd < 0) die("seccomp");
					send_fd(sp[1], lfd);
					close(lfd);
					execl("/bin/bash", "bash", "-c", "true", (char *)NULL);
					_exit(127);
				}
				int st;
				waitpid(cmd, &st, 0);
				_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
			}
			int st;
			waitpid(init, &st, 0);
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
		}
		int lfd = recv_fd(sp[0]);
		int st;
		waitpid(child, &st, 0);
		if (lfd >= 0) close(lfd);
		c = (lfd >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 'y' : 'n';
		if (write(rep, &c, 1) != 1) die("reply");
	}
	double cpu = cpu_ms(RUSAGE_CHILDREN) + cpu_ms(RUSAGE_SELF) - cpu0;
	if (write(rep, &cpu, sizeof cpu) != sizeof cpu) die("reply");
	_exit(0);
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: session-floor ROUNDS MOUNTS WS SCRATCH\n");
		return 2;
	}
	int rounds = atoi(argv[1]), mounts = atoi(argv[2]);
	const char *ws = argv[3];
	if (rounds <= 0 || mounts < 0) {
		fprintf(stderr, "session-floor: ROUNDS must be positive and MOUNTS not negative\n");
		return 2;
	}
	int req[2], rep[2];
	if (pipe2(req, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) die("pipe");
	pid_t z = fork();
	if (z < 0) die("fork");
	if (z == 0) {
		close(req[1]);
		close(rep[0]);
		zygote(req[0], rep[1], mounts, argv[4]);
	}
	close(req[0]);
	close(rep[1]);
	char *bw[] = {"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent", "--tmpfs", "/tmp",
	              "--bind", (char *)ws, (char *)ws, "--chdir", (char *)ws, "--", "bash", "-c", "true", NULL};
	double *tf = calloc(rounds, sizeof *tf), *tb = calloc(rounds, sizeof *tb), bcpu = 0;
	for (int i = 0; i < rounds; i++) {
		char c = 'r';
		double t0 = now_ms();
		if (write(req[1], &c, 1) != 1 || read(rep[0], &c, 1) != 1 || c != 'y') {
			fprintf(stderr, "session-floor: the floor's command %d failed\n", i);
			return 1;
		}
		double t1 = now_ms(), c0 = cpu_ms(RUSAGE_CHILDREN);
		pid_t b;
		int st;
		if (posix_spawnp(&b, "bwrap", NULL, NULL, bw, environ) != 0 || waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "session-floor: bwrap %d failed\n", i);
			return 1;
		}
		tf[i] = t1 - t0;
		tb[i] = now_ms() - t1;
		bcpu += cpu_ms(RUSAGE_CHILDREN) - c0;
	}
	close(req[1]);
	double fcpu = 0;
	if (read(rep[0], &fcpu, sizeof fcpu) != sizeof fcpu) die("the floor's CPU");
	waitpid(z, NULL, 0);
	qsort(tf, rounds, sizeof *tf, cmp);
	qsort(tb, rounds, sizeof *tb, cmp);
	double mf = tf[rounds / 2], mb = tb[rounds / 2];
	printf("| %d commands, bash -c true | median | CPU per command |\n|---|---|---|\n", rounds);
	printf("| bwrap, upstream profile | %.2f ms | %.2f ms |\n", mb, bcpu / rounds);
	printf("| session floor, %d mounts | %.2f ms (%.2f x bwrap) | %.2f ms (%.2f x bwrap) |\n", mounts, mf, mf / mb, fcpu / rounds,
	       fcpu / bcpu);
	return 0;
}
C
"$cc" -O2 -o "$work/session-floor" "$work/session-floor.c" || die "cannot build the floor program"
"$work/session-floor" "$rounds" "$mounts" "$work/ws" "$work/scratch"
