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


#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CTRL_FD 3
#define SPEC_MAX (1024 * 1024)
#define MAX_TOKENS 65536

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static char reasons[4096];

// Namespaces the runner created (reported in the ready message).
static int ns_user, ns_mount, ns_pid, ns_net, ns_ipc, ns_uts;
static char ns_error[512];

// caches: a character per toolchain cache overlay of the mount plan, '1'
// mounted, '0' not (reported in the listener and ready messages).
static char caches[129];


// json_str appends s to out as a JSON string literal.
static void json_str(char *out, size_t cap, const char *s) {
	size_t n = strlen(out);
	if (n + 2 >= cap) return;
	out[n++] = '"';
	for (; *s && n + 8 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = c;
		} else if (c < 0x20 || c == 0x7f) {
			n += snprintf(out + n, cap - n, "\\u%04x", c);
		} else {
			out[n++] = c;
		}
	}
	out[n++] = '"';
	out[n] = 0;
}

// send_msg sends one control message. It uses send(2) (sendto without an
// address), which the seccomp filter does not route to the supervisor:
// sendmsg is always routed there. Only the listener travels as a
// descriptor, from a helper outside the filter (send_listener); the
// supervisor takes the others with pidfd_getfd.
static int send_msg(const char *msg) {
	ssize_t r;
	do {
		r = send(CTRL_FD, msg, strlen(msg), MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : 0;
}

// fail reports why the sandbox cannot be set up and ends the runner; the
// command has not been started.
static void fail(const char *fmt, ...) {
	char detail[2048], msg[4600] = "{\"kind\":\"fail\",\"detail\":";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	json_str(msg, sizeof msg - 2, detail);
	strcat(msg, "}");
	send_msg(msg);
	_exit(125);
}

// fail_sys is fail for a call that failed with errno e: the message names
// the call (op) and carries e, so that the supervisor can tell running out
// of processes, descriptors or memory from a host that cannot confine.
static void fail_sys(const char *op, int e) {
	char msg[4600];
	snprintf(msg, sizeof msg, "{\"kind\":\"fail\",\"errno\":%d,\"op\":", e);
	json_str(msg, sizeof msg - 2, op);
	strcat(msg, ",\"detail\":");
	char detail[1200];
	snprintf(detail, sizeof detail, "%s: %s", op, strerror(e));
	json_str(msg, sizeof msg - 2, detail);
	strcat(msg, "}");
	send_msg(msg);
	_exit(125);
}

// out_of_resources: e means no process, descriptor or memory was left.
static int out_of_resources(int e) { return e == EAGAIN || e == EMFILE || e == ENFILE || e == ENOMEM || e == ETOOMANYREFS; }

static void add_reason(const char *fmt, ...) {
	char r[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r, sizeof r, fmt, ap);
	va_end(ap);
	if (reasons[0]) strncat(reasons, "; ", sizeof reasons - strlen(reasons) - 1);
	strncat(reasons, r, sizeof reasons - strlen(reasons) - 1);
}

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

static ssize_t recv_msg(char *buf, size_t cap) {
	ssize_t n;
	do {
		n = recv(CTRL_FD, buf, cap, 0);
	} while (n < 0 && errno == EINTR);
	return n;
}

// Spec tokens.
static char *tok[MAX_TOKENS];
static int ntok;

static int read_only(const char *path) {
	struct statvfs st;
	return statvfs(path, &st) == 0 && (st.f_flag & ST_RDONLY);
}

static int no_dev(const char *path) {
	struct statvfs st;
	return statvfs(path, &st) == 0 && (st.f_flag & ST_NODEV);
}

// apply_mounts runs the supervisor's mount plan. It returns 1 when the view
// is complete, 0 when some step failed (the reason is recorded; every step is
// a restriction or neutral, so a partial view is never looser than none).
static int apply_mounts(int from, int *fresh_proc, int ruleset) {
	int ok = 1;
	// skip_rules: the last mount was a cache overlay that failed, so the
	// Landlock rules that follow it (on its inodes) are not added.
	int skip_rules = 0;
	for (int i = from; i < ntok; i++) {
		int md = strcmp(tok[i], "md") == 0;
		if ((md || strcmp(tok[i], "m") == 0) && i + 5 + md < ntok) {
			// m SRC TGT FSTYPE FLAGS MODE, md ... DATA
			const char *src = tok[i + 1], *tgt = tok[i + 2], *fs = tok[i + 3], *mode = tok[i + 5];
			const char *data = md ? tok[i + 6] : NULL;
			unsigned long flags = strtoul(tok[i + 4], NULL, 10);
			int cache = strcmp(mode, "cache") == 0;
			i += 5 + md;
			skip_rules = 0;
			if (strcmp(mode, "proc") == 0 && !ns_pid) continue;
			if (mount(*src ? src : NULL, tgt, *fs ? fs : NULL, flags, data) == 0) {
				if (strcmp(mode, "proc") == 0) *fresh_proc = 1;
				if (cache) strncat(caches, "1", sizeof caches - strlen(caches) - 1);
				continue;
			}
			int e = errno;
			if (cache) {
				// A toolchain cache without its overlay stays read-only
				// (as outside every writable root): less convenient,
				// never looser.
				strncat(caches, "0", sizeof caches - strlen(caches) - 1);
				skip_rules = 1;
				continue;
			}
			if (strcmp(mode, "proc") == 0) {
				add_reason("no fresh /proc: %s", strerror(e));
				continue;
			}
			if ((flags & MS_REMOUNT) && (flags & MS_RDONLY) && read_only(tgt)) continue;
			if (strcmp(mode, "skip") == 0 && (e == EACCES || e == ENOENT || e == ENOTDIR)) continue;
			add_reason("mount view: %s %s: %s", (flags & MS_REMOUNT) ? "read-only" : *fs ? fs : "bind", tgt, strerror(e));
			return 0;
		} else if (strcmp(tok[i], "r") == 0 && i + 2 < ntok) {
			// Remount a mount point read-only (flags: what it must keep);
			// tolerant of mounts this uid cannot reach.
			const char *tgt = tok[i + 1];
			unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | strtoul(tok[i + 2], NULL, 10);
			i += 2;
			if (mount(NULL, tgt, NULL, flags, NULL) == 0 || (read_only(tgt) && (!(flags & MS_NODEV) || no_dev(tgt)))) continue;
			int e = errno;
			if (e == EACCES || e == ENOENT || e == ENOTDIR) continue;
			add_reason("mount view: read-only %s: %s", tgt, strerror(e));
			return 0;
		} else if (strcmp(tok[i], "l") == 0 && i + 2 < ntok) {
			// l PATH ACCESS: a Landlock rule on a path this view created
			// (the fresh devpts), added before the runner restricts itself.
			const char *path = tok[i + 1];
			unsigned long long access = strtoull(tok[i + 2], NULL, 10);
			i += 2;
			if (ruleset < 0 || skip_rules) continue;
			struct landlock_path_beneath {
				unsigned long long allowed_access;
				int parent_fd;
			} __attribute__((packed)) pb = {.allowed_access = access, .parent_fd = open(path, O_PATH | O_CLOEXEC)};
			if (pb.parent_fd < 0) fail("landlock rule %s: %s", path, strerror(errno));
			if (syscall(SYS_landlock_add_rule, ruleset, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) < 0)
				fail("landlock rule %s: %s", path, strerror(errno));
			close(pb.parent_fd);
		} else if (strcmp(tok[i], "same") == 0 && i + 2 < ntok) {
			// same FD PATH: FD, a directory the supervisor opened and
			// checked, becomes PATH as this mount namespace sees it — the
			// same inode, reached without a symlink — so that a later step
			// can name it /proc/self/fd/FD (an overlay refuses a layer
			// whose mount belongs to another namespace). Another inode
			// there means the directory was replaced since: fail.
			int fd = atoi(tok[i + 1]);
			const char *path = tok[i + 2];
			i += 2;
			struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
			int nfd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
			if (nfd < 0) fail("%s: %s", path, strerror(errno));
			struct stat held, seen;
			if (fstat(fd, &held) < 0 || fstat(nfd, &seen) < 0) fail("%s: %s", path, strerror(errno));
			if (held.st_dev != seen.st_dev || held.st_ino != seen.st_ino)
				fail("%s is not the directory the supervisor checked: it was replaced while the sandbox started", path);
			if (dup3(nfd, fd, O_CLOEXEC) < 0) fail("%s: %s", path, strerror(errno));
			close(nfd);
		} else if (strcmp(tok[i], "ro") == 0 && i + 1 < ntok) {
			i++;
			if (!read_only(tok[i])) {
				add_reason("mount view self-test: %s is still writable", tok[i]);
				ok = 0;
			}
		} else {
			fail("runner: malformed mount plan at token %d (%s)", i, tok[i]);
		}
	}
	return ok;
}

static void drop_capabilities(void) {
	for (int c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL || errno == EPERM) break;
			fail("drop bounding capability %d: %s", c, strerror(errno));
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail("clear ambient capabilities: %s", strerror(errno));
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0) fail("capset: %s", strerror(errno));
	if (syscall(SYS_capget, &h, d) < 0 || d[0].effective || d[1].effective || d[0].permitted || d[1].permitted)
		fail("capability self-test: capabilities remain after dropping them");
}

static int opt(const char *key);
static const char *opt_str(const char *key);

// cache_env: without a mount view, each toolchain cache a tool finds
// through a variable gets it set to the cache's upper layer (writable by a
// Landlock rule the supervisor added), unless the command has it already;
// caches then says 'e' for it ('0' for the others).
static void cache_env(void) {
	int n = opt("ncaches");
	if (n <= 0 || n >= (int)sizeof caches) return;
	memset(caches, '0', (size_t)n);
	caches[n] = 0;
	static char buf[8192];
	if (snprintf(buf, sizeof buf, "%s", opt_str("cacheenv")) >= (int)sizeof buf) return;
	for (char *save = NULL, *e = strtok_r(buf, "\n", &save); e; e = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(e, ':'), *eq = colon ? strchr(colon, '=') : NULL;
		if (!colon || !eq) continue;
		int i = atoi(e);
		*eq = 0;
		if (i < 0 || i >= n || getenv(colon + 1)) continue;
		if (setenv(colon + 1, eq + 1, 0) == 0) caches[i] = 'e';
	}
}

static int opt(const char *key) {
	for (int i = 1; i + 1 < ntok && strcmp(tok[i], "ops") != 0; i += 2)
		if (strcmp(tok[i], key) == 0) return atoi(tok[i + 1]);
	return 0;
}

static const char *opt_str(const char *key) {
	for (int i = 1; i + 1 < ntok && strcmp(tok[i], "ops") != 0; i += 2)
		if (strcmp(tok[i], key) == 0) return tok[i + 1];
	return "";
}

static pid_t child;
static int pid1;
// nextra is the number of the command's extra files: the runner's fds 4..
static int nextra;

// close_extra closes the runner's copies of the command's extra files, in a
// process that does not start the command.
static void close_extra(void) {
	for (int i = 0; i < nextra; i++) close(CTRL_FD + 1 + i);
}
// keeper_death_signal is the parent-death signal of an inner keeper: its
// relay is gone, so it kills the tree.
#define keeper_death_signal (SIGRTMIN + 3)

// kill_tree_signal asks a pid namespace's init to kill its namespace
// (Cmd.Kill sends it, then SIGKILL if the init has not exited in time). The
// init does it with kill(-1) — one call, atomic with respect to fork — and
// reports the command's status. SIGKILL alone ends the namespace only once
// the init has torn down its own memory, which takes locks (a shared file's
// i_mmap lock) that a few hundred forking processes hold in turn: that held
// the init's exit, and so the zap of its namespace, back for up to 50 s.
#define kill_tree_signal (SIGRTMIN + 4)

int dsh_kill_tree_signal(void) { return kill_tree_signal; }

// proc_stat reads the parent, the state and the start time of pid from
// /proc/PID/stat; it returns -1 when the process is gone.
static int proc_stat(pid_t pid, pid_t *ppid, char *state, unsigned long long *start) {
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p) return -1;
	// After "(comm)": state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime ...
	int pp;
	char st;
	if (sscanf(p + 1, " %c %d", &st, &pp) != 2) return -1;
	p += 2;
	for (int field = 0; field < 19 && p; field++) p = strchr(p + 1, ' ');
	if (!p) return -1;
	*ppid = pp;
	*state = st;
	*start = strtoull(p + 1, NULL, 10);
	return 0;
}

// pidlist is a growable array of pids.
struct pidlist {
	pid_t *v;
	size_t n, cap;
};

static void pl_push(struct pidlist *l, pid_t p) {
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		pid_t *v = realloc(l->v, cap * sizeof *v);
		if (!v) return; // out of memory: this one is found in a later pass
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = p;
}

// read_children appends the children of every thread of pid to out
// (/proc/PID/task/TID/children, read to its end: the kernel hands out at
// most a page per read(2), ~500 pids). The list is not a snapshot — children
// that exit or are reparented while it is read can make it skip others — so
// kill_tree passes until a pass finds nothing new.
static void read_children(pid_t pid, struct pidlist *out) {
	static char *buf;
	static size_t cap;
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d) return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
		snprintf(path, sizeof path, "/proc/%d/task/%.16s/children", (int)pid, e->d_name);
		for (;;) {
			if (cap == 0) {
				cap = 64 * 1024;
				buf = malloc(cap);
				if (!buf) {
					cap = 0;
					break;
				}
			}
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) break;
			size_t n = 0;
			for (;;) {
				if (n + 1 >= cap) {
					char *b = realloc(buf, 2 * cap);
					if (!b) break;
					buf = b;
					cap *= 2;
				}
				ssize_t r = read(fd, buf + n, cap - 1 - n);
				if (r < 0 && errno == EINTR) continue;
				if (r <= 0) break;
				n += (size_t)r;
			}
			close(fd);
			buf[n] = 0;
			for (char *p = buf, *end; *p; p = end) {
				long k = strtol(p, &end, 10);
				if (end == p) break;
				if (k > 0) pl_push(out, (pid_t)k);
			}
			break;
		}
	}
	closedir(d);
}

// killed is the set of processes this kill_tree has SIGKILLed, by pid and
// start time (open addressing, grown at half load).
static struct killed_ent {
	pid_t pid;
	unsigned long long start;
} *killed;
static size_t killed_cap, killed_n;

// mark_killed records (pid, start) and returns 1 if it was new.
static int mark_killed(pid_t pid, unsigned long long start) {
	if (2 * (killed_n + 1) > killed_cap) {
		size_t cap = killed_cap ? 2 * killed_cap : 1024;
		struct killed_ent *t = calloc(cap, sizeof *t);
		if (!t) return 1;
		for (size_t i = 0; i < killed_cap; i++) {
			if (!killed[i].pid) continue;
			size_t h = ((size_t)killed[i].pid * 2654435761u) & (cap - 1);
			while (t[h].pid) h = (h + 1) & (cap - 1);
			t[h] = killed[i];
		}
		free(killed);
		killed = t;
		killed_cap = cap;
	}
	size_t h = ((size_t)pid * 2654435761u) & (killed_cap - 1);
	for (; killed[h].pid; h = (h + 1) & (killed_cap - 1))
		if (killed[h].pid == pid && killed[h].start == start) return 0;
	killed[h].pid = pid;
	killed[h].start = start;
	killed_n++;
	return 1;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

// node is a process found in the tree: its pid and start time.
struct node {
	pid_t pid;
	unsigned long long start;
};

// walk_tree lists the live descendants of this process in *out (from index
// 1; 0 is this process) and SIGSTOPs every one not stopped yet, counting
// those in *running. A pid counts only through a pidfd, after /proc says its
// parent is the process whose list named it (or this process, which adopts
// the orphans of a process that died meanwhile), and a parent's list counts
// only if the parent's start time is unchanged after it was read: so a pid
// reused by a process outside the tree is never signalled.
static size_t walk_tree(struct node **out, size_t *running) {
	struct pidlist kids = {0};
	size_t nn = 0, ncap = 256;
	pid_t self = getpid(), pp;
	char st;
	unsigned long long start;
	*running = 0;
	struct node *nodes = malloc(ncap * sizeof *nodes);
	*out = nodes;
	if (!nodes || proc_stat(self, &pp, &st, &start) < 0) return 0;
	nodes[nn].pid = self;
	nodes[nn++].start = start;
	for (size_t i = 0; i < nn; i++) {
		pid_t parent = nodes[i].pid;
		kids.n = 0;
		read_children(parent, &kids);
		if (proc_stat(parent, &pp, &st, &start) < 0 || start != nodes[i].start) continue;
		for (size_t k = 0; k < kids.n; k++) {
			pid_t c = kids.v[k];
			int fd = (int)syscall(SYS_pidfd_open, c, 0);
			if (fd < 0) continue;
			unsigned long long cs;
			if (proc_stat(c, &pp, &st, &cs) < 0 || (pp != parent && pp != self) || st == 'Z' || st == 'X') {
				close(fd);
				continue;
			}
			if (st != 'T' && st != 't') {
				syscall(SYS_pidfd_send_signal, fd, SIGSTOP, NULL, 0);
				++*running;
			}
			close(fd);
			if (nn == ncap) {
				struct node *n2 = realloc(nodes, 2 * ncap * sizeof *nodes);
				if (!n2) continue; // its children are found in a later pass
				*out = nodes = n2;
				ncap *= 2;
			}
			nodes[nn].pid = c;
			nodes[nn++].start = cs;
		}
	}
	free(kids.v);
	return nn;
}

// stop_wait_ms bounds the stopping in one kill_pass: a process that does not
// stop (in uninterruptible sleep, a vfork parent waiting for its stopped
// child, or continued by another process of the command) is killed running.
#define stop_wait_ms 200

// kill_pass stops the tree, then SIGKILLs every process of it, and returns
// how many it had not killed before. Without a pid namespace nothing kills a
// tree atomically: a process that left the command's process group is found
// only by walking the tree, and while a walk kills a process its children
// are being reparented (so the walk may miss them) and go on forking. A
// stopped process forks no more and its children stay its own, so once a
// walk finds the whole tree stopped, it has found the whole tree.
static size_t kill_pass(void) {
	struct node *nodes = NULL;
	size_t nn = 0, running, fresh = 0;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		free(nodes);
		nn = walk_tree(&nodes, &running);
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (running == 0 || ms >= stop_wait_ms) break;
		struct timespec pause = {0, 1000000};
		nanosleep(&pause, NULL);
	}
	for (size_t i = 1; i < nn; i++) {
		pid_t pp;
		char st;
		unsigned long long cs;
		int fd = (int)syscall(SYS_pidfd_open, nodes[i].pid, 0);
		if (fd < 0) continue;
		if (proc_stat(nodes[i].pid, &pp, &st, &cs) == 0 && cs == nodes[i].start) {
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			if (mark_killed(nodes[i].pid, cs)) fresh++;
		}
		close(fd);
	}
	free(nodes);
	return fresh;
}

// child_status is the command's main process's wait status once kill_tree
// reaped it in a pid namespace (child_reaped).
static int child_status, child_reaped;

// leader_unreaped: the command's main process (child) has not been reaped,
// so its pid — the id of its process group — names nothing else.
static int leader_unreaped;

// wait_chld waits up to ms milliseconds for a SIGCHLD (blocked, in the
// keeper and the relay alike), and takes it.
static void wait_chld(long ms) {
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	sigtimedwait(&chld, NULL, &ts);
}

// kill_tree kills every process left in the sandbox and reaps it.
static void kill_tree(void) {
	if (pid1) {
		// Inside our pid namespace -1 means "everyone but me", and a
		// process with SIGKILL pending forks no more; kill until kill(-1)
		// finds nobody (zombies count), reaping everything in between.
		for (;;) {
			int r = kill(-1, SIGKILL);
			for (;;) {
				int st;
				pid_t w = waitpid(-1, &st, 0);
				if (w == child && child > 0) child_status = st, child_reaped = 1;
				if (w < 0 && errno != EINTR) break;
			}
			// ESRCH: nobody is left. Any other error (EPERM cannot
			// happen to the init of its own namespace) must not spin.
			if (r < 0) return;
		}
	}
	// A child subreaper: orphans are reparented to us, so every process of
	// the command is a descendant. First the command's process group, in
	// one call: the kernel delivers a group's SIGKILL atomically with
	// respect to fork (a fork racing it fails, or its child is killed too),
	// so a fork bomb that stays in its group — every shell's does — dies at
	// once, however fast it forks. Only while the leader is unreaped: then
	// its pid, the group's id, cannot have been reused.
	if (child > 0 && leader_unreaped) kill(-child, SIGKILL);
	// Then what left the group (setsid, setpgid): the whole tree, pass
	// after pass, reaping what exited, until no child is left. A pass that
	// finds nothing new waits a little for the dying to go, and passes
	// again: a children list read while the tree changes is not exact, so
	// no pass is taken as the last until no child is left.
	for (;;) {
		size_t fresh = kill_pass();
		int reaped = 0;
		for (;;) {
			pid_t r = waitpid(-1, NULL, WNOHANG);
			if (r > 0) {
				if (r == child) leader_unreaped = 0;
				reaped = 1;
				continue;
			}
			if (r < 0 && errno == EINTR) continue;
			if (r < 0 && errno == ECHILD) goto out;
			break;
		}
		if (fresh == 0 && !reaped) wait_chld(20);
	}
out:
	leader_unreaped = 0;
	free(killed);
	killed = NULL;
	killed_cap = killed_n = 0;
}

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

static int terminating(unsigned sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT; }

// supervise is the runner's init loop: forward signals to the command's
// process group, reap orphans, kill the tree when the command's main process
// ends (or the supervisor goes away), and report the status.
static void supervise(int sfd) {
	int status = 0;
	struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN}, {.fd = CTRL_FD, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR) continue;
			break;
		}
		if (pfd[1].revents) {
			// The supervisor sends nothing after "ready" (it kills the tree
			// itself, see Cmd.Kill): this only watches for it to go.
			char m[256];
			ssize_t n = recv_msg(m, sizeof m - 1);
			if (n <= 0) {
				kill_tree(); // the supervisor is gone: nothing may outlive it
				_exit(1);
			}
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) != sizeof si) continue;
			if ((int)si.ssi_signo == keeper_death_signal && !pid1) {
				kill_tree(); // the relay is gone
				_exit(1);
			}
			if ((int)si.ssi_signo == kill_tree_signal) {
				if (!pid1) continue; // the supervisor kills a keeper's tree itself
				kill_tree();
				status = child_reaped ? child_status : W_EXITCODE(0, SIGKILL);
				goto report;
			}
			if (si.ssi_signo != SIGCHLD) {
				if (kill(-child, si.ssi_signo) < 0) kill(child, si.ssi_signo);
				// A stopped command runs its TERM (INT, HUP, QUIT) trap only
				// once continued.
				if (terminating(si.ssi_signo) && kill(-child, SIGCONT) < 0) kill(child, SIGCONT);
				continue;
			}
			// Reap orphans as they exit, but not the command's main
			// process: it stays a zombie, its pid (its group's id)
			// reserved, until kill_tree has killed the group.
			for (;;) {
				siginfo_t si2 = {0};
				if (waitid(P_ALL, 0, &si2, WEXITED | WNOHANG | WNOWAIT) < 0 || si2.si_pid == 0) break;
				if (si2.si_pid == child) {
					status = si2.si_code == CLD_EXITED ? W_EXITCODE(si2.si_status, 0) : W_EXITCODE(0, si2.si_status);
					goto done;
				}
				while (waitpid(si2.si_pid, NULL, 0) < 0 && errno == EINTR) {
				}
			}
		}
	}
done:
	kill_tree();
report:;
	char msg[128];
	if (WIFSIGNALED(status))
		snprintf(msg, sizeof msg, "{\"kind\":\"exit\",\"exit_code\":%d,\"signal\":%d}", 128 + WTERMSIG(status), WTERMSIG(status));
	else
		snprintf(msg, sizeof msg, "{\"kind\":\"exit\",\"exit_code\":%d}", WEXITSTATUS(status));
	send_msg(msg);
	_exit(0);
}

static int write_file(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	ssize_t n = write(fd, data, strlen(data));
	int e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(data) ? 0 : -1;
}


// enter_namespaces moves the runner into new user, mount, ipc, uts, pid (for
// its children) and, without network, net namespaces, mapping the caller's
// uid and gid to themselves. A host that refuses user namespaces leaves the
// runner where it was (ns_error says why); a host that lets us create one but
// not map our ids leaves us unusable, and the runner fails with "userns-map"
// so the supervisor can start a fresh runner without namespaces.
static void enter_namespaces(int want_net) {
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER) < 0) {
		int e = errno;
		const char *why = e == ENOSPC ? "user.max_user_namespaces is 0 or exhausted"
		                  : (e == EPERM || e == EACCES) ? "blocked by the host (AppArmor userns restriction, a container seccomp profile, or a sysctl)"
		                  : e == EINVAL || e == ENOSYS ? "not supported by this kernel" : strerror(e);
		snprintf(ns_error, sizeof ns_error, "user namespaces unavailable: %s", why);
		return;
	}
	char map[64];
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0) {
		if (out_of_resources(errno)) fail_sys("uid_map", errno);
		fail("userns-map: uid_map: %s", strerror(errno));
	}
	if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) {
		if (out_of_resources(errno)) fail_sys("setgroups", errno);
		fail("userns-map: setgroups: %s", strerror(errno));
	}
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/gid_map", map) < 0) {
		if (out_of_resources(errno)) fail_sys("gid_map", errno);
		fail("userns-map: gid_map: %s", strerror(errno));
	}
	ns_user = 1;
	struct {
		int flag, *done;
		const char *name;
	} more[] = {{CLONE_NEWNS, &ns_mount, "mount"}, {CLONE_NEWIPC, &ns_ipc, "ipc"}, {CLONE_NEWUTS, &ns_uts, "uts"},
	            {CLONE_NEWPID, &ns_pid, "pid"}, {CLONE_NEWNET, &ns_net, "net"}};
	for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
		if (more[i].flag == CLONE_NEWNET && !want_net) continue;
		if (unshare(more[i].flag) == 0)
			*more[i].done = 1;
		else
			add_reason("no %s namespace: %s", more[i].name, strerror(errno));
	}
}

// seal_process makes this process of the runner's (relay, keeper, init)
// non-dumpable, so that the command — same uid, same Landlock domain —
// cannot reach it through /proc: not its descriptors (/proc/PID/fd: the
// transaction's directory and layers, which it keeps open), nor its memory,
// environment, cwd or root links. Only a process with CAP_SYS_PTRACE over
// the user namespace the runner was started in (the initial one) could, and
// the command has no capability. Called once the supervisor has taken
// every descriptor it needs from the process (pidfd_getfd checks the same
// access), and before the command is started.
static void seal_process(void) {
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) fail("set non-dumpable: %s", strerror(errno));
}

// relay is what stays of the runner once its child keeps the command: the
// init of the new pid namespace, or, without one, an inner keeper. It passes
// signals on to that child and ends with it. If the relay dies, the child's
// parent-death signal ends the tree (the kernel kills a pid namespace with
// its init; an inner keeper kills its tree). If the inner keeper dies
// instead, its orphans come to the relay (a child subreaper too), which
// kills them: killing either process never leaves the command running.
// A child stopped by SIGSTOP (without a pid namespace the command can signal
// its keeper) is continued at once, so that it goes on forwarding signals,
// reaping and reporting.
static void relay(pid_t init, int subreaper) {
	seal_process();
	sigset_t all;
	sigfillset(&all);
	int sfd = signalfd(-1, &all, SFD_CLOEXEC);
	for (;;) {
		struct signalfd_siginfo si;
		int st;
		pid_t r;
		if (sfd < 0 || read(sfd, &si, sizeof si) != sizeof si) {
			r = waitpid(init, &st, WUNTRACED);
			if (r == init && WIFSTOPPED(st)) {
				kill(init, SIGCONT);
				continue;
			}
			if (r == init || errno == ECHILD) break;
			continue;
		}
		if (si.ssi_signo == SIGCHLD) {
			r = waitpid(init, &st, WNOHANG | WUNTRACED);
			if (r == init && WIFSTOPPED(st)) {
				kill(init, SIGCONT);
				continue;
			}
			if (r == init) break;
			continue;
		}
		kill(init, si.ssi_signo);
	}
	if (subreaper) kill_tree();
	_exit(0);
}


// recv_bpf receives the seccomp program, with the Landlock ruleset fd
// attached (SCM_RIGHTS) when there is one.
static ssize_t recv_bpf(char *buf, size_t cap, int *ruleset) {
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t n;
	do {
		n = recvmsg(CTRL_FD, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	*ruleset = -1;
	if (n > 0 && (mh.msg_flags & MSG_CTRUNC)) fail_sys("receive the Landlock ruleset", EMFILE);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(ruleset, CMSG_DATA(c), sizeof(int));
	return n;
}

// setup_namespaces is step 0. With a pid namespace it forks the namespace's
// init and returns in it; the runner itself stays outside as a relay.
static void setup_namespaces(int want_net) {
	enter_namespaces(want_net);
	if (!ns_pid) return;
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	// The supervisor learns the init's pid (as seen from outside) before
	// the init says anything: the init waits on gate.
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0) fail_sys("pipe", errno);
	pid_t init = fork();
	if (init < 0) fail_sys("fork", errno);
	if (init > 0) {
		char im[64];
		snprintf(im, sizeof im, "{\"kind\":\"init\",\"pid\":%d}", (int)init);
		send_msg(im);
		close(gate[1]);
		close(gate[0]);
		close_extra();
		relay(init, 0);
	}
	close(gate[1]);
	char c;
	while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
	}
	close(gate[0]);
	sigprocmask(SIG_SETMASK, &old, NULL);
	// (The relay, outside this pid namespace, is invisible here: getppid()
	// is 0, so a parent-death race cannot be checked that way; the control
	// socket still ends the tree if the supervisor goes.)
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) fail("set parent-death signal: %s", strerror(errno));
}

// The seccomp program, received in runner_main and loaded by load_filter.
static char bpf[SPEC_MAX];
static char *bpf_g = bpf;
static ssize_t blen_g;

// nest_signal_scope puts the command's process in a Landlock domain nested
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
static void nest_signal_scope(void) {
	const unsigned long long refer = 1ULL << 13; // LANDLOCK_ACCESS_FS_REFER
	struct {
		unsigned long long handled_access_fs, handled_access_net, scoped;
	} attr = {refer, 0, 1ULL << 1 /* LANDLOCK_SCOPE_SIGNAL */};
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (fd < 0) fail_sys("landlock: signal scope", errno);
	struct {
		unsigned long long allowed_access;
		int parent_fd;
	} __attribute__((packed)) pb = {.allowed_access = refer, .parent_fd = open("/", O_PATH | O_CLOEXEC)};
	if (pb.parent_fd < 0 || syscall(SYS_landlock_add_rule, fd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) < 0)
		fail_sys("landlock: signal scope", errno);
	close(pb.parent_fd);
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0) fail_sys("landlock: signal scope", errno);
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
	         mount_view ? 1 : 0, ns_net ? 1 : 0, ns_ipc ? 1 : 0, caches);
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
	return recv_msg(ack, sizeof ack - 1) > 0 ? 0 : 255;
}

// load_filter is step 5, in the command's process before it execs: it loads
// the seccomp filter and, with user notification, hands the listener to the
// supervisor (see send_listener). fail reports to the supervisor directly
// (send(2) is never routed).
static void load_filter(int notify, int mount_view) {
	struct sock_fprog prog = {.len = (unsigned short)(blen_g / sizeof(struct sock_filter)), .filter = (struct sock_filter *)bpf_g};
	int np[2] = {-1, -1};
	pid_t sender = -1;
	if (notify) {
		if (pipe2(np, O_CLOEXEC) < 0) fail_sys("pipe", errno);
		sender = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (sender < 0) fail_sys("clone the listener's sender", errno);
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
			if (code != 0) fail_sys("seccomp: pass the listener", code);
		}
	}
	if (lfd < 0) {
		if (out_of_resources(load_errno)) fail_sys("seccomp: load filter", load_errno);
		fail("seccomp: load filter: %s", strerror(load_errno));
	}
	if (notify) close((int)lfd);
	errno = 0;
	if (syscall(SYS_io_uring_setup, 0, NULL) != -1 || errno != EPERM)
		fail("seccomp self-test: io_uring_setup was not denied (%s)", strerror(errno));
}

// parse_addr parses "a.b.c.d" or "[v6]" (brackets optional) into ss.
static socklen_t parse_addr(char *a, int port, struct sockaddr_storage *ss) {
	memset(ss, 0, sizeof *ss);
	size_t l = strlen(a);
	if (a[0] == '[' && l >= 3 && a[l - 1] == ']') {
		a[l - 1] = 0;
		a++;
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		return sizeof *s6;
	}
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		return sizeof *s4;
	}
	fail("egress: bad address %s", a);
	return 0;
}

// pass_egress_fd hands one egress socket to the supervisor and closes it
// once the supervisor holds its copy; fd -1 says that socket could not be
// made.
static void pass_egress_fd(int fd) {
	char lm[128], ack[64];
	snprintf(lm, sizeof lm, "{\"kind\":\"netlisten\",\"fd\":%d,\"pid\":%d}", fd, getpid() == 1 ? 0 : (int)getpid());
	if (send_msg(lm) < 0) fail("pass an egress socket: %s", strerror(errno));
	if (recv_msg(ack, sizeof ack - 1) <= 0) _exit(125);
	if (fd >= 0) close(fd);
}

// add_lo_address puts the address of ss on the namespace's loopback
// (RTM_NEWADDR), so that a socket can be bound to it: a nameserver of
// resolv.conf that is not a loopback address. It returns 0 or an errno.
static int add_lo_address(const struct sockaddr_storage *ss) {
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
		char attrs[64];
	} req;
	memset(&req, 0, sizeof req);
	const void *addr;
	int alen;
	if (ss->ss_family == AF_INET) {
		addr = &((const struct sockaddr_in *)ss)->sin_addr;
		alen = 4;
	} else {
		addr = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		alen = 16;
	}
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	req.nh.nlmsg_type = RTM_NEWADDR;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK;
	req.ifa.ifa_family = (unsigned char)ss->ss_family;
	req.ifa.ifa_prefixlen = (unsigned char)(alen * 8);
	req.ifa.ifa_flags = IFA_F_NODAD;
	req.ifa.ifa_scope = RT_SCOPE_HOST;
	req.ifa.ifa_index = if_nametoindex("lo");
	if (req.ifa.ifa_index == 0) return errno ? errno : ENODEV;
	for (int t = 0; t < 2; t++) {
		struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
		rta->rta_type = t == 0 ? IFA_LOCAL : IFA_ADDRESS;
		rta->rta_len = (unsigned short)RTA_LENGTH(alen);
		memcpy(RTA_DATA(rta), addr, (size_t)alen);
		req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	}
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0) return errno;
	struct sockaddr_nl to = {.nl_family = AF_NETLINK};
	if (sendto(nl, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&to, sizeof to) < 0) {
		int e = errno;
		close(nl);
		return e;
	}
	char buf[512];
	ssize_t n = recv(nl, buf, sizeof buf, 0);
	int e = n < 0 ? errno : 0;
	close(nl);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (e == 0 && (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR)) e = EPROTO;
	if (e == 0) e = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return e == EEXIST ? 0 : e;
}

// stub_socket binds a UDP socket to port 53 of a (putting the address on
// the loopback first when it is not a loopback address); -1 with errno set
// when that fails.
static int stub_socket(char *a) {
	struct sockaddr_storage ss;
	socklen_t sl = parse_addr(a, 53, &ss);
	int loop = ss.ss_family == AF_INET ? (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127
	                                   : IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	if (!loop) {
		int e = add_lo_address(&ss);
		if (e) {
			errno = e;
			return -1;
		}
	}
	int u = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (u < 0) return -1;
	int one = 1;
	if (ss.ss_family == AF_INET6) setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(u, (struct sockaddr *)&ss, sl) < 0) {
		int e = errno;
		close(u);
		errno = e;
		return -1;
	}
	return u;
}

// loopback_up brings up the loopback of the command's net namespace (its
// only interface): the command's own servers and the egress proxy's
// listeners live there.
static void loopback_up(void) {
	if (!ns_net) return;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) fail_sys("socket", errno);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail("read the flags of the sandbox's loopback: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail("bring up the sandbox's loopback: %s", strerror(errno));
	close(s);
}

// egress_listeners is step 0b, in a net namespace of the runner's own under
// a network allowlist: it brings the namespace's loopback up and listens on
// each address of the spec's "egress" list (comma-separated, "a.b.c.d:port"
// or "[v6]:port": the egress proxy's, then the loopback hosts'), then binds a
// UDP socket to port 53 of each address of the "dns" list (the nameservers
// of resolv.conf, put on the loopback when they are not loopback
// addresses), handing each socket to the supervisor (which takes a copy with
// pidfd_getfd, then acknowledges). The command's connections to those
// addresses thus reach the supervisor, and nothing else can: the namespace
// has no other route.
static void egress_listeners(void) {
	const char *list = opt_str("egress");
	if (!list[0] || !ns_net) return;
	char buf[4096];
	if (strlen(list) >= sizeof buf) fail("egress: listener list too long");
	strcpy(buf, list);
	int one = 1;
	for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(a, ':');
		if (!colon) fail("egress: bad listener address %s", a);
		*colon = 0;
		int port = atoi(colon + 1);
		struct sockaddr_storage ss;
		socklen_t sl = parse_addr(a, port, &ss);
		int l = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l < 0) fail_sys("socket", errno);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ss.ss_family == AF_INET6) setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
		if (bind(l, (struct sockaddr *)&ss, sl) < 0) fail("egress: listen on %s:%d in the sandbox: %s", a, port, strerror(errno));
		if (listen(l, 512) < 0) fail("egress: listen on %s:%d in the sandbox: %s", a, port, strerror(errno));
		pass_egress_fd(l);
	}
	const char *dns = opt_str("dns");
	if (strlen(dns) >= sizeof buf) fail("egress: nameserver list too long");
	strcpy(buf, dns);
	for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		// A nameserver the namespace cannot take (IPv6 disabled, say)
		// only costs the command that resolver: the supervisor is told
		// with fd -1, and the reason goes with the ready message.
		char name[64];
		snprintf(name, sizeof name, "%s", a);
		int u = stub_socket(a);
		if (u < 0) {
			if (out_of_resources(errno)) fail_sys("stub resolver socket", errno);
			add_reason("no stub resolver at %s: %s", name, strerror(errno));
		}
		pass_egress_fd(u);
	}
}

static void runner_main(char **argv) {
	static char spec[SPEC_MAX];
	ssize_t n = recv_msg(spec, sizeof spec - 1);
	if (n <= 0) _exit(125);
	spec[n] = 0;
	for (char *p = spec; p < spec + n; p += strlen(p) + 1) {
		if (ntok == MAX_TOKENS) fail("runner: spec has too many tokens");
		tok[ntok++] = p;
	}
	if (ntok < 1 || strcmp(tok[0], "dsh1") != 0) fail("runner: bad spec");
	int ops = 0;
	while (ops < ntok && strcmp(tok[ops], "ops") != 0) ops++;
	char **cmd = argv + 1;
	if (!cmd[0]) fail("runner: no command");
	nextra = opt("extra");
	if (nextra < 0 || nextra > 64) fail("runner: bad number of extra files");
	for (int i = 0; i < nextra; i++)
		if (fcntl(CTRL_FD + 1 + i, F_GETFD) < 0) fail("runner: extra file %d (fd %d) is not open", i, CTRL_FD + 1 + i);

	int confine = opt("confine"), mount_view = 0, fresh_proc = 0, landlock = 0, notify = 0, ruleset = -1;
	if (confine) {
		ssize_t blen = recv_bpf(bpf, sizeof bpf, &ruleset);
		// One program, or two (the second, bpf2 bytes at the end, routes
		// metadata changes for a command without a mount view; picked
		// below).
		ssize_t blen2 = opt("bpf2");
		if (blen <= 0 || blen2 < 0 || blen2 >= blen || blen % sizeof(struct sock_filter) || blen2 % sizeof(struct sock_filter))
			fail("runner: bad seccomp program");
		if (opt("landlock") && ruleset < 0) fail("runner: no Landlock ruleset");
		// 0. Namespaces.
		if (opt("userns")) setup_namespaces(opt("netns"));
		loopback_up();
		egress_listeners();
		// 1. Mount view.
		if (ns_mount) {
			char cwd[4096];
			int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
			mount_view = apply_mounts(ops + 1, &fresh_proc, ruleset);
			// Re-enter the working directory so relative paths use the new mounts.
			if (have_cwd && chdir(cwd) < 0) fail("chdir %s: %s", cwd, strerror(errno));
		}
		if (!mount_view && !opt("landlock"))
			fail("no filesystem confinement is possible on this host (%s%s%s%s%s)", ns_error, ns_error[0] ? "; " : "",
			     opt_str("why"), reasons[0] ? "; " : "", reasons);
		if (!mount_view && opt("landlock")) cache_env();
		// A deny-read path that only the mount view can hide (one in a
		// writable root) fails closed without it.
		if (!mount_view && opt_str("needview")[0]) {
			if (!ns_error[0] && !reasons[0]) fail("%s", opt_str("needview"));
			fail("%s (no mount view: %s%s%s)", opt_str("needview"), ns_error, ns_error[0] && reasons[0] ? "; " : "", reasons);
		}
		// 2. Capabilities. 3. no_new_privs.
		drop_capabilities();
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail("set no_new_privs: %s", strerror(errno));
		// 4. Landlock, prepared by the supervisor as a ruleset fd.
		if (opt("landlock")) {
			if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) fail("landlock_restrict_self: %s", strerror(errno));
			close(ruleset);
			if (opt("llselftest")) {
				int fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC);
				if (fd >= 0) fail("landlock self-test: a write outside the policy was allowed");
				if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) fail_sys("landlock self-test", errno);
				if (errno != EACCES) fail("landlock self-test: expected EACCES, got %s", strerror(errno));
			}
			landlock = 1;
		}
		// 5. seccomp: loaded by the command's process alone, after the fork
		// below (load_filter), so that the runner's own processes (relay,
		// keeper, init) can always signal and kill the tree, the
		// supervisor gone or not: calls the filter routes to the supervisor
		// fail with ENOSYS once its listener is closed.
		// Without a mount view, the program that routes metadata changes
		// to the supervisor (the listener message says which was loaded).
		if (blen2 > 0 && !mount_view) {
			bpf_g = bpf + (blen - blen2);
			blen_g = blen2;
		} else {
			blen_g = blen - blen2;
		}
		notify = opt("notify");
	}
	// 7. Start the command in a new session; stay as its init.
	pid1 = getpid() == 1;
	if (!pid1) {
		// No pid namespace: a relay (this process) and an inner keeper,
		// both child subreapers, so that no single kill from outside frees
		// the command's tree (see relay).
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) fail("set child subreaper: %s", strerror(errno));
		sigset_t all, prev;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &prev);
		pid_t outer = getpid();
		pid_t keeper = fork();
		if (keeper < 0) fail_sys("fork", errno);
		if (keeper > 0) {
			close_extra();
			relay(keeper, 1);
		}
		if (prctl(PR_SET_PDEATHSIG, keeper_death_signal, 0, 0, 0) < 0) fail("set parent-death signal: %s", strerror(errno));
		if (getppid() != outer) _exit(125);
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) fail("set child subreaper: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &prev, NULL);
		// The supervisor learns the keeper before the command can stop or
		// kill anything (it may run before "ready").
		char km[64];
		snprintf(km, sizeof km, "{\"kind\":\"keeper\",\"pid\":%d}", (int)getpid());
		if (send_msg(km) < 0) _exit(125);
	}
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, keeper_death_signal);
	sigaddset(&mask, kill_tree_signal);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&mask, forwarded[i]);
	sigprocmask(SIG_BLOCK, &mask, &old);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) fail_sys("signalfd", errno);
	// A close-on-exec pipe tells whether the command's execve succeeded
	// (EOF) or failed (its errno): a command that cannot be started is
	// reported as such, not as an exit status.
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) fail_sys("pipe", errno);
	// Resource limit without a cgroup: RLIMIT_NPROC, which counts the
	// processes of the real uid in this user namespace (ucounts, Linux
	// 5.14), so per command only inside one the runner made; uid 0 is
	// exempt from it. Set before the command's fork, inherited by all of it.
	int nproc = 0;
	if (opt("nproc") > 0 && ns_user && getuid() != 0) {
		struct rlimit rl = {(rlim_t)opt("nproc"), (rlim_t)opt("nproc")};
		nproc = setrlimit(RLIMIT_NPROC, &rl) == 0;
	}
	// Nothing more is taken from this process (the listener goes from the
	// command's own process, by SCM_RIGHTS).
	seal_process();
	child = fork();
	if (child < 0) fail_sys("fork", errno);
	leader_unreaped = child > 0;
	if (child == 0) {
		close(ep[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		setsid();
		if (confine && !pid1 && opt("scopesig")) nest_signal_scope();
		if (confine) load_filter(notify, mount_view);
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
		const char *path = opt_str("path");
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
	close_extra();
	int exec_errno = 0;
	ssize_t er;
	do {
		er = read(ep[0], &exec_errno, sizeof exec_errno);
	} while (er < 0 && errno == EINTR);
	close(ep[0]);
	if (er == (ssize_t)sizeof exec_errno) {
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
		}
		char detail[1024], em[2400];
		snprintf(detail, sizeof detail, "%s: %s", opt_str("path")[0] ? opt_str("path") : cmd[0], strerror(exec_errno));
		snprintf(em, sizeof em, "{\"kind\":\"execfail\",\"errno\":%d,\"detail\":", exec_errno);
		json_str(em, sizeof em - 2, detail);
		strcat(em, "}");
		send_msg(em);
		_exit(exec_errno == ENOENT ? 127 : 126);
	}
	char msg[6000];
#define B(x) ((x) ? "true" : "false")
	snprintf(msg, sizeof msg,
	         "{\"kind\":\"ready\",\"layers\":{\"user\":%s,\"mount\":%s,\"pid\":%s,\"net\":%s,\"ipc\":%s,\"uts\":%s,"
	         "\"mount_view\":%s,\"fresh_proc\":%s,\"landlock\":%s,\"seccomp\":%s,\"notify\":%s,\"nproc\":%s,\"cmd_pid\":%d,\"ns_error\":",
	         B(ns_user), B(ns_mount), B(ns_pid), B(ns_net), B(ns_ipc), B(ns_uts), B(mount_view), B(fresh_proc), B(landlock),
	         B(confine), B(notify), B(nproc), (int)child);
#undef B
	json_str(msg, sizeof msg - 2, ns_error);
	strcat(msg, "},\"caches\":");
	json_str(msg, sizeof msg - 2, caches);
	strcat(msg, ",\"detail\":");
	json_str(msg, sizeof msg - 2, reasons);
	strcat(msg, "}");
	if (send_msg(msg) < 0) {
		kill_tree();
		_exit(125);
	}
	supervise(sfd);
}

// dsh_sandbox_runner runs before the Go runtime when this process was started
// as a runner (argv[0] "dsh-sandbox-runner" and _DSH_SANDBOX_RUNNER=1), and
// returns at once otherwise.
__attribute__((constructor)) static void dsh_sandbox_runner(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 1 || !argv || !argv[0] || strcmp(argv[0], "dsh-sandbox-runner") != 0) return;
	const char *m = getenv("_DSH_SANDBOX_RUNNER");
	if (!m || strcmp(m, "1") != 0) return;
	unsetenv("_DSH_SANDBOX_RUNNER");
	cloexec_from(CTRL_FD);
	runner_main(argv);
	_exit(125);
}
