// The runner's processes once the command runs — the relay, the inner keeper
// and the pid namespace's init — and the kill of the command's tree.

#include "runner_linux.h"

pid_t dshr_child;
int dshr_pid1;

// dsh_kill_tree_signal is kill_tree_signal, for Go (runner_cgo_linux.go).
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
// dshr_kill_tree passes until a pass finds nothing new.
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

// killed is the set of processes this dshr_kill_tree has SIGKILLed, by pid and
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

// child_status is the command's main process's wait status once dshr_kill_tree
// reaped it in a pid namespace (child_reaped).
static int child_status, child_reaped;

// dshr_leader_unreaped: the command's main process (dshr_child) has not been reaped,
// so its pid — the id of its process group — names nothing else.
int dshr_leader_unreaped;

// wait_chld waits up to ms milliseconds for a SIGCHLD (blocked, in the
// keeper and the relay alike), and takes it.
static void wait_chld(long ms) {
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	sigtimedwait(&chld, NULL, &ts);
}

// dshr_kill_tree kills every process left in the sandbox and reaps it.
void dshr_kill_tree(void) {
	if (dshr_pid1) {
		// Inside our pid namespace -1 means "everyone but me", and a
		// process with SIGKILL pending forks no more; kill until kill(-1)
		// finds nobody (zombies count), reaping everything in between.
		for (;;) {
			int r = kill(-1, SIGKILL);
			for (;;) {
				int st;
				pid_t w = waitpid(-1, &st, 0);
				if (w == dshr_child && dshr_child > 0) child_status = st, child_reaped = 1;
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
	if (dshr_child > 0 && dshr_leader_unreaped) kill(-dshr_child, SIGKILL);
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
				if (r == dshr_child) dshr_leader_unreaped = 0;
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
	dshr_leader_unreaped = 0;
	free(killed);
	killed = NULL;
	killed_cap = killed_n = 0;
}

// send_status sends the command's wait status as a message of kind kind.
static void send_status(const char *kind, int status) {
	char msg[128];
	if (WIFSIGNALED(status))
		snprintf(msg, sizeof msg, "{\"kind\":\"%s\",\"exit_code\":%d,\"signal\":%d}", kind, 128 + WTERMSIG(status), WTERMSIG(status));
	else
		snprintf(msg, sizeof msg, "{\"kind\":\"%s\",\"exit_code\":%d}", kind, WEXITSTATUS(status));
	dshr_send_msg(msg);
}

static int terminating(unsigned sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT; }

// dshr_supervise is the runner's init loop: forward signals to the command's
// process group, reap orphans, kill the tree when the command's main process
// ends (or the supervisor goes away), and report the status.
void dshr_supervise(int sfd) {
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
			ssize_t n = dshr_recv_msg(m, sizeof m - 1);
			if (n <= 0) {
				dshr_kill_tree(); // the supervisor is gone: nothing may outlive it
				_exit(1);
			}
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) != sizeof si) continue;
			if ((int)si.ssi_signo == keeper_death_signal && !dshr_pid1) {
				dshr_kill_tree(); // the relay is gone
				_exit(1);
			}
			if ((int)si.ssi_signo == kill_tree_signal) {
				if (!dshr_pid1) {
					// An inner keeper kills the command's process group,
					// in one call atomic with respect to fork, while it
					// holds the leader unreaped; the leader's end then
					// takes the loop to its walk and report below. The
					// supervisor walks for what left the group, and kills
					// this keeper if it is slow (Tree.Kill).
					if (dshr_child > 0 && dshr_leader_unreaped) kill(-dshr_child, SIGKILL);
					continue;
				}
				dshr_kill_tree();
				status = child_reaped ? child_status : W_EXITCODE(0, SIGKILL);
				goto report;
			}
			if (si.ssi_signo != SIGCHLD) {
				if (kill(-dshr_child, si.ssi_signo) < 0) kill(dshr_child, si.ssi_signo);
				// A stopped command runs its TERM (INT, HUP, QUIT) trap only
				// once continued.
				if (terminating(si.ssi_signo) && kill(-dshr_child, SIGCONT) < 0) kill(dshr_child, SIGCONT);
				continue;
			}
			// Reap orphans as they exit, but not the command's main
			// process: it stays a zombie, its pid (its group's id)
			// reserved, until dshr_kill_tree has killed the group.
			for (;;) {
				siginfo_t si2 = {0};
				if (waitid(P_ALL, 0, &si2, WEXITED | WNOHANG | WNOWAIT) < 0 || si2.si_pid == 0) break;
				if (si2.si_pid == dshr_child) {
					status = si2.si_code == CLD_EXITED ? W_EXITCODE(si2.si_status, 0) : W_EXITCODE(0, si2.si_status);
					goto done;
				}
				while (waitpid(si2.si_pid, NULL, 0) < 0 && errno == EINTR) {
				}
			}
		}
	}
done:
	// Without a pid namespace the tree is killed by walking it, which a
	// bomb that left the command's group can make slow: the supervisor
	// learns the status first, and with a cgroup kills the rest at once.
	if (!dshr_pid1) send_status("ended", status);
	dshr_kill_tree();
report:
	send_status("exit", status);
	_exit(0);
}

// dshr_seal_process makes this process of the runner's (relay, keeper, init)
// non-dumpable, so that the command — same uid, same Landlock domain —
// cannot reach it through /proc: not its descriptors (/proc/PID/fd: the
// transaction's directory and layers, which it keeps open), nor its memory,
// environment, cwd or root links. Only a process with CAP_SYS_PTRACE over
// the user namespace the runner was started in (the initial one) could, and
// the command has no capability. Called once the supervisor has taken
// every descriptor it needs from the process (pidfd_getfd checks the same
// access), and before the command is started.
void dshr_seal_process(void) {
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) dshr_fail("set non-dumpable: %s", strerror(errno));
}

// dshr_relay is what stays of the runner once its child keeps the command: the
// init of the new pid namespace, or, without one, an inner keeper. It passes
// signals on to that child and ends with it. If the relay dies, the child's
// parent-death signal ends the tree (the kernel kills a pid namespace with
// its init; an inner keeper kills its tree). If the inner keeper dies
// instead, its orphans come to the relay (a child subreaper too), which
// kills them: killing either process never leaves the command running.
// A child stopped by SIGSTOP (without a pid namespace the command can signal
// its keeper) is continued at once, so that it goes on forwarding signals,
// reaping and reporting.
void dshr_relay(pid_t init, int subreaper) {
	dshr_seal_process();
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
	if (subreaper) dshr_kill_tree();
	_exit(0);
}
