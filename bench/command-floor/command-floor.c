// command-floor: the kernel work one dsh-sandbox command needs to keep its
// guarantees, done by a minimal C program, timed against bubblewrap.
//
// Issue 30 asks for Executor.Run of `bash -c true` (workspace-write) at or
// below bubblewrap's time per command, and for the proof, where that is out
// of reach, to be "the floor measured on this machine with a minimal program
// doing only that step". This is that program. It has no Go, no JSON, no
// policy derivation, no supervisor protocol: per command it makes only the
// system calls dsh-sandbox's runner and supervisor make to confine it
// (captured with strace, see README.md), in cumulative variants, so that the
// cost each step adds can be read off:
//
//   0 bare      fork, exec /bin/bash -c true, wait
//   1 ns        + user, UTS and net namespaces made once (a "session", as
//                 runner_session_linux.c); per command a clone into new mount,
//                 IPC and pid namespaces, whose pid 1 (the init) forks the
//                 command, waits for it and kills what is left (kill(-1))
//   2 view      + the mount view of runner_ns_linux.c's dshr_apply_mounts:
//                 the same number and kinds of mounts as dsh's workspace-write
//                 view (toolchain cache overlays and binds, writable roots,
//                 masks, a credential copy, device binds, every host mount
//                 read-only, a fresh devpts and /proc, /proc's global entries
//                 read-only), with the supervisor's per-command files (the
//                 overlays' work directories, the credential copy) made before
//                 and removed after
//   3 landlock  + a Landlock ruleset built per command by the parent (as the
//                 supervisor's landlock.Ruleset.Build: an O_PATH open, a rule
//                 and a close per path), the view's own rules added by the
//                 init, capabilities dropped, not dumpable, no_new_privs,
//                 landlock_restrict_self
//   4 seccomp   + the command's seccomp filter (dsh's own program with -F, or
//                 a synthetic one of the same length) with a user-notification
//                 listener, handed to the parent by a helper process over
//                 SCM_RIGHTS as runner_filter_linux.c does; a parent thread
//                 answers each notification with CONTINUE
//   5 cgroup    + a cgroup v1 group per command in the pids, memory, cpu,
//                 cpuacct and freezer hierarchies: mkdir, the default limits
//                 written, joined by the init writing "0" to each tasks file,
//                 rmdir after (sandbox/internal/limits)
//   5 -overlays variant 5 without the three toolchain-cache overlays (see
//                 README.md: on this machine, the costliest part of the view)
//   6 session-view variant 5 with the view made once per session: the
//                 session also has a mount namespace of its own, in which it
//                 made every part of the view that does not depend on the
//                 command's pid namespace (the overlays with one work
//                 directory each, the binds, masks, credential copy, devices,
//                 read-only remounts); each command's clone copies it, and
//                 its init mounts only its devpts and /proc (with /proc's
//                 global entries read-only)
//   7 session-pid variant 6 with the pid (and IPC) namespace made once per
//                 session too, so that its view, /proc and devpts included,
//                 and its Landlock ruleset (the view's rules with it) are
//                 made once: per command the session's pid 1 forks, the child
//                 joins the cgroup, confines itself with the session's
//                 ruleset (capabilities, no_new_privs, restrict_self) and
//                 execs the command, which loads its filter; after it, the
//                 group is listed (what the command left would be killed
//                 there, the init's kill(-1) of variants 1-6) and orphans
//                 reaped. (Reusing the ruleset needs this: with a /proc per
//                 command, the ruleset needs a rule on that /proc, and a
//                 ruleset cannot be copied. Landlock skips the mount points
//                 it crosses, so a rule on the session's /proc does not
//                 cover one mounted on top of it: variant 6 with the
//                 ruleset kept gets EACCES on /proc/self/status.)
//   bwrap       bwrap --ro-bind / / --dev /dev --proc /proc --die-with-parent
//                 --tmpfs /tmp --bind WS WS -- /bin/bash -c true
//
// Variants 1-5 run in a session process (in the user namespace), variant 6
// in a second one that also holds the view; bare and bwrap in a host process
// of the same size. The main process interleaves
// batches of every variant, and reports per variant the median wall time per
// command and the CPU time per command (getrusage of the parent and of its
// reaped children; and the machine's busy time from /proc/stat, which also
// counts the kernel's own threads). A throughput mode runs W concurrent
// workers of one variant for T commands in all and reports commands/s.
//
// Run as root (as the project's CI does). Usage: see usage() or README.md.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

// ---------------------------------------------------------------------------
// What dsh's workspace-write view and policy hold on the capture host (see
// README.md: dsh-sandbox-run's mountinfo and strace, as root). The floor makes
// the same number of each, on scratch paths of its own.

#define N_OVERLAYS 3   // toolchain caches with an overlay (go-build, go/pkg/mod, npm)
#define N_CACHEBINDS 6 // toolchain caches bound from their upper layer (yarn, pnpm, pip, uv, cargo x2)
#define N_MASKFILES 5  // deny-read files covered by /dev/null (shadow, gshadow, ...)
#define N_MASKDIRS 2   // deny-read directories covered by an empty tmpfs
#define SUP_RULES 197  // Landlock rules the supervisor adds (landlock_add_rule in its strace)
// The init adds one rule per cache (9), the credential copy, /dev/pts,
// /dev/ptmx and /proc: 13, as the runner's "l" steps do; 210 in all.

// Landlock (defined here: the system's <linux/landlock.h> may predate ABI 6).
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
#define LL_FS_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_FS_FILE (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
#define LL_FS_PTY (LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

struct ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

// The variants. V_NOOVL is variant 5 without the toolchain caches' three
// overlays (the view's costliest part: see README.md); it comes after
// V_CGROUP so that it has every step of the others.
// V_SVIEW is variant 5 with the view held by the session: see session_view.
// V_SPID is V_SVIEW with the pid namespace, and so /proc and the ruleset,
// made once per session too.
enum { V_BARE, V_NS, V_VIEW, V_LANDLOCK, V_SECCOMP, V_CGROUP, V_NOOVL, V_SVIEW, V_SPID, V_BWRAP, NV };
static const char *vname[NV] = {"0 bare",    "1 +ns",      "2 +view",        "3 +landlock",   "4 +seccomp",
                                "5 +cgroup", "5 -overlays", "6 session-view", "7 session-pid", "bwrap"};
// session_held says whether variant v runs in a session that holds the view.
static int session_held(int v) { return v == V_SVIEW || v == V_SPID; }

#define MAX_BATCH 1000
#define MAX_PATH 512

// ---------------------------------------------------------------------------
// Options.

static int opt_n = 300;           // commands per variant
static int opt_batch = 10;        // commands per batch (the unit of interleaving)
static int opt_warm = 1;          // warm-up batches per variant, not counted
static int opt_workers = 4;       // throughput: concurrent workers (0: no throughput)
static int opt_total = 400;       // throughput: commands in all
static int opt_reps = 3;          // throughput: repetitions of each
static int opt_check = 0;         // run each variant once, output shown, and stop
static int opt_vmask = (1 << NV) - 1;
static int opt_tmask = 1 << V_BARE | 1 << V_CGROUP | 1 << V_NOOVL | 1 << V_SVIEW | 1 << V_SPID | 1 << V_BWRAP; // throughput variants
static int opt_synthetic = 235;   // synthetic filter length without -F
static const char *opt_bash = "/bin/bash";
static const char *opt_script = "true";
static const char *opt_ws;        // workspace (made in /tmp when not given)
static const char *opt_scratch = "/var/tmp";
static const char *opt_filter;    // a BPF program file (dsh's)
static const char *opt_bwrap = "bwrap";
static const char *opt_raw;       // per-command wall times, as CSV

static pid_t main_pid;
static int runner_kind = -1; // which runner this process is (or serves), for unique names

// ---------------------------------------------------------------------------
// Small helpers.

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "command-floor: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// cpu_ns is the user and system time of who (RUSAGE_SELF, RUSAGE_CHILDREN).
static long long cpu_ns(int who) {
	struct rusage ru;
	getrusage(who, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

// busy_ns is the machine's busy time so far (/proc/stat: user, nice,
// system, irq, softirq of every CPU), in ns: what rusage misses, the work
// the kernel defers to its own threads (namespace and cgroup teardown, RCU).
static long long busy_ns(void) {
	FILE *f = fopen("/proc/stat", "re");
	if (!f) return 0;
	unsigned long long u = 0, n = 0, s = 0, idle = 0, io = 0, irq = 0, sirq = 0;
	int k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &u, &n, &s, &idle, &io, &irq, &sirq);
	fclose(f);
	if (k != 7) return 0;
	return (long long)((u + n + s + irq + sirq) * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK)));
}

// pathf formats a path into dst (MAX_PATH bytes); a path that does not fit
// is an error.
__attribute__((format(printf, 2, 3))) static char *pathf(char *dst, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(dst, MAX_PATH, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= MAX_PATH) die("path too long: %s...", dst);
	return dst;
}

// write_file writes data to the existing file path in one write(2), as the
// runner writes its id maps and cgroup files: 0, or -1 with errno (EIO for a
// short write).
static int write_file(const char *path, const char *data) {
	size_t len = strlen(data);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	ssize_t n = write(fd, data, len);
	int failed = n < 0 ? errno : EIO;
	close(fd);
	if (n == (ssize_t)len) return 0;
	errno = failed;
	return -1;
}

static void mkdir_p(const char *path, mode_t mode) {
	char p[MAX_PATH];
	pathf(p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/') continue;
		*s = 0;
		if (mkdir(p, mode) < 0 && errno != EEXIST) die("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST) die("mkdir %s: %s", p, strerror(errno));
}

static void touch(const char *path) {
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) die("create %s: %s", path, strerror(errno));
	close(fd);
}

// rm_tree removes name (relative to dirfd) and everything beneath it,
// without following symlinks.
static int rm_tree(int dirfd, const char *name) {
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return 0;
	if (errno != EISDIR && errno != EPERM) return -1;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) rm_tree(fd, e->d_name);
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR);
}

static int under(const char *path, const char *root) {
	size_t n = strlen(root);
	if (strcmp(root, "/") == 0) return 1;
	return strncmp(path, root, n) == 0 && (path[n] == 0 || path[n] == '/');
}

// kept is the mount flags of path's mount that a remount must repeat (in a
// user namespace the ones inherited from the host are locked): what dsh's
// mountplan.keptFlags reads with statvfs.
static unsigned long kept(const char *path) {
	struct statvfs st;
	if (statvfs(path, &st) < 0) die("statvfs %s: %s", path, strerror(errno));
	unsigned long f = 0;
	if (st.f_flag & ST_RDONLY) f |= MS_RDONLY;
	if (st.f_flag & ST_NOSUID) f |= MS_NOSUID;
	if (st.f_flag & ST_NODEV) f |= MS_NODEV;
	if (st.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
	if (st.f_flag & ST_NOATIME) f |= MS_NOATIME;
	if (st.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
	if (st.f_flag & ST_RELATIME) f |= MS_RELATIME;
	return f;
}

static char *xstrdup(const char *s) {
	char *p = strdup(s);
	if (!p) die("out of memory");
	return p;
}

// ---------------------------------------------------------------------------
// The mount view: a list of mount(2) calls, made once from the host's facts,
// replayed by each command's init. Fields a command changes (the overlays'
// work directories, the credential copy) point at buffers the parent fills
// before each clone.

struct mnt {
	const char *src, *tgt, *fs;
	unsigned long flags;
	const char *data;
	int part; // P_*, or -1: the first, which makes the tree private
};

static struct mnt view[1024];
static int nview;
static int cur_part = -1; // the part build_view is adding

static void add_mount(const char *src, const char *tgt, const char *fs, unsigned long flags, const char *data) {
	if (nview == (int)(sizeof view / sizeof view[0])) die("mount view too long");
	view[nview++] = (struct mnt){src, tgt, fs, flags, data, cur_part};
}

// The scratch tree (under opt_scratch): the caches, masks and credential
// target the view mounts on, in place of dsh's paths under $HOME and /etc.
static char scratch[MAX_PATH];
static char ov_dir[N_OVERLAYS][MAX_PATH], ov_upper[N_OVERLAYS][MAX_PATH], ov_work[N_OVERLAYS][MAX_PATH];
static char bind_dir[N_CACHEBINDS][MAX_PATH], bind_upper[N_CACHEBINDS][MAX_PATH];
static char mask_file[N_MASKFILES][MAX_PATH], mask_dir[N_MASKDIRS][MAX_PATH];
static char cred_target[MAX_PATH];

// Per command (filled by the parent before the clone).
static char ov_data[N_OVERLAYS][3 * MAX_PATH + 64]; // the overlay's options, its work directory fresh
static char ov_wdir[N_OVERLAYS][MAX_PATH];
static char cred_dir[MAX_PATH], cred_file[MAX_PATH]; // the credential copy, in /dev/shm
static unsigned cmd_seq;

// The view's parts, which -O can leave out to see what each costs.
enum { P_OVERLAYS, P_CACHEBINDS, P_ROOTS, P_MASKS, P_CREDS, P_DEVICES, P_READONLY, P_DEVPTS, P_PROC, P_PROCGLOBALS, NPARTS };
static const char *part_name[NPARTS] = {"overlays", "cachebinds", "roots", "masks", "creds", "devices", "readonly", "devpts", "proc", "procglobals"};
static int view_omit; // a bit per part left out

static int in_view(int part) { return !(view_omit & (1 << part)); }

// per_command says whether a part of the view depends on the command's own
// pid namespace, and so is mounted per command in variant 6 too.
static int per_command(int part) { return part == P_DEVPTS || part == P_PROC || part == P_PROCGLOBALS; }

static const char *writable_roots[4];
static int nwritable;
static const char *devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
static int have_device[6];
static int have_ptmx_bind;
static int nproc_globals, nremount_ro;

static void make_scratch(void) {
	pathf(scratch, "%s/dsh-command-floor.XXXXXX", opt_scratch);
	if (!mkdtemp(scratch)) die("mkdtemp %s: %s", scratch, strerror(errno));
	for (int k = 0; k < N_OVERLAYS; k++) {
		pathf(ov_dir[k], "%s/overlay%d/dir", scratch, k);
		pathf(ov_upper[k], "%s/overlay%d/upper", scratch, k);
		pathf(ov_work[k], "%s/overlay%d/work", scratch, k);
		mkdir_p(ov_dir[k], 0755), mkdir_p(ov_upper[k], 0755), mkdir_p(ov_work[k], 0700);
	}
	for (int k = 0; k < N_CACHEBINDS; k++) {
		pathf(bind_dir[k], "%s/cache%d/dir", scratch, k);
		pathf(bind_upper[k], "%s/cache%d/upper", scratch, k);
		mkdir_p(bind_dir[k], 0755), mkdir_p(bind_upper[k], 0755);
	}
	char masks[MAX_PATH];
	pathf(masks, "%s/mask", scratch);
	mkdir_p(masks, 0755);
	for (int k = 0; k < N_MASKFILES; k++) {
		pathf(mask_file[k], "%s/mask/file%d", scratch, k);
		touch(mask_file[k]);
	}
	for (int k = 0; k < N_MASKDIRS; k++) {
		pathf(mask_dir[k], "%s/mask/dir%d", scratch, k);
		mkdir_p(mask_dir[k], 0700);
	}
	pathf(cred_target, "%s/npmrc", scratch);
	touch(cred_target);
}

// host_mount_points lists the host's mount points (deduplicated, in
// /proc/self/mountinfo's order), as mountplan.mountPoints does.
static int host_mount_points(char **out, int cap) {
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) die("mountinfo: %s", strerror(errno));
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		char mp[MAX_PATH], un[MAX_PATH];
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1) continue;
		// Unescape \ooo (spaces, tabs, newlines and backslashes in paths).
		size_t j = 0;
		for (size_t i = 0; mp[i] && j + 1 < sizeof un; i++) {
			if (mp[i] == '\\' && mp[i + 1] && mp[i + 2] && mp[i + 3]) {
				un[j++] = (char)(((mp[i + 1] - '0') << 6) | ((mp[i + 2] - '0') << 3) | (mp[i + 3] - '0'));
				i += 3;
			} else {
				un[j++] = mp[i];
			}
		}
		un[j] = 0;
		int dup = 0;
		for (int i = 0; i < n && !dup; i++) dup = strcmp(out[i], un) == 0;
		if (!dup && n < cap) out[n++] = xstrdup(un);
	}
	fclose(f);
	return n;
}

// proc_globals lists /proc's entries that are not per process, as dsh's
// mountplan.procGlobals does for root: every entry listed before the first
// pid, self or thread-self, but symlinks.
static int proc_globals(char **out, int cap) {
	DIR *d = opendir("/proc");
	if (!d) die("/proc: %s", strerror(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *s = e->d_name;
		if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
		if ((s[0] >= '0' && s[0] <= '9') || !strcmp(s, "self") || !strcmp(s, "thread-self")) break;
		if (e->d_type == DT_LNK) continue;
		if (n < cap) {
			char p[MAX_PATH];
			pathf(p, "/proc/%s", s);
			out[n++] = xstrdup(p);
		}
	}
	closedir(d);
	return n;
}

// build_view makes the mount plan, in the order of dsh's mountplan.Plan
// (compare dsh-sandbox-run's strace in README.md).
static void build_view(void) {
	const unsigned long cache_fl = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV;
	const unsigned long mask_fl = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	const char *tiny = "mode=0700,size=4k,nr_inodes=16";
	cur_part = -1;
	add_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	// Toolchain caches: overlays, then binds of an upper layer.
	cur_part = P_OVERLAYS;
	for (int k = 0; k < N_OVERLAYS && in_view(P_OVERLAYS); k++) add_mount("overlay", ov_dir[k], "overlay", MS_NOSUID | MS_NODEV, ov_data[k]);
	cur_part = P_CACHEBINDS;
	for (int k = 0; k < N_CACHEBINDS && in_view(P_CACHEBINDS); k++) {
		add_mount(bind_upper[k], bind_dir[k], NULL, MS_BIND, NULL);
		add_mount(NULL, bind_dir[k], NULL, cache_fl | kept(bind_upper[k]), NULL);
	}
	// Writable roots, nodev.
	cur_part = P_ROOTS;
	for (int k = 0; k < nwritable && in_view(P_ROOTS); k++) {
		add_mount(writable_roots[k], writable_roots[k], NULL, MS_BIND | MS_REC, NULL);
		add_mount(NULL, writable_roots[k], NULL, MS_REMOUNT | MS_BIND | MS_NODEV | kept(writable_roots[k]), NULL);
	}
	// Deny-read paths: files under /dev/null, directories under an empty tmpfs.
	cur_part = P_MASKS;
	for (int k = 0; k < N_MASKFILES && in_view(P_MASKS); k++) {
		add_mount("/dev/null", mask_file[k], NULL, MS_BIND, NULL);
		add_mount(NULL, mask_file[k], NULL, MS_REMOUNT | MS_BIND | mask_fl | kept("/dev/null"), NULL);
	}
	for (int k = 0; k < N_MASKDIRS && in_view(P_MASKS); k++) add_mount("tmpfs", mask_dir[k], "tmpfs", mask_fl, tiny);
	// A credential file's sanitized copy over it, read-only; the copies'
	// directory hidden.
	cur_part = P_CREDS;
	if (in_view(P_CREDS)) {
		add_mount(cred_file, cred_target, NULL, MS_BIND, NULL);
		add_mount(NULL, cred_target, NULL, MS_REMOUNT | MS_BIND | mask_fl | kept(cred_target), NULL);
		add_mount("tmpfs", cred_dir, "tmpfs", mask_fl, tiny);
	}
	// The devices that stay openable, bound onto themselves, read-only.
	cur_part = P_DEVICES;
	for (int k = 0; k < 6; k++) {
		struct stat st;
		have_device[k] = stat(devices[k], &st) == 0 && S_ISCHR(st.st_mode);
		if (!have_device[k] || !in_view(P_DEVICES)) continue;
		add_mount(devices[k], devices[k], NULL, MS_BIND, NULL);
		add_mount(NULL, devices[k], NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | kept(devices[k]), NULL);
	}
	// Every other mount point of the host, read-only and nodev.
	cur_part = P_READONLY;
	static char *points[512];
	int np = host_mount_points(points, 512);
	for (int i = 0; i < np; i++) {
		const char *m = points[i];
		int skip = under(m, "/proc");
		for (int k = 0; k < nwritable && !skip; k++) skip = strcmp(m, writable_roots[k]) == 0;
		for (int k = 0; k < 6 && !skip; k++) skip = strcmp(m, devices[k]) == 0;
		if (skip || !in_view(P_READONLY)) continue;
		add_mount(NULL, m, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV | kept(m), NULL);
		nremount_ro++;
	}
	// A devpts of the sandbox's own, its ptmx as /dev/ptmx.
	struct stat st;
	have_ptmx_bind = lstat("/dev/ptmx", &st) == 0 && !S_ISLNK(st.st_mode);
	cur_part = P_DEVPTS;
	if (in_view(P_DEVPTS)) {
		add_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
		if (have_ptmx_bind) add_mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL);
	}
	// A fresh /proc (the pid namespace's), read-only while each global
	// entry is bound onto itself (a bind takes its mount's flags), then
	// writable again for /proc/PID.
	unsigned long proc_fl = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC | kept("/proc");
	cur_part = P_PROC;
	if (in_view(P_PROC)) add_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	static char *globals[256];
	cur_part = P_PROCGLOBALS;
	if (in_view(P_PROC) && in_view(P_PROCGLOBALS)) {
		add_mount(NULL, "/proc", NULL, proc_fl | MS_RDONLY, NULL);
		nproc_globals = proc_globals(globals, 256);
		for (int i = 0; i < nproc_globals; i++) add_mount(globals[i], globals[i], NULL, MS_BIND | MS_REC, NULL);
		add_mount(NULL, "/proc", NULL, proc_fl, NULL);
	}
}

// ---------------------------------------------------------------------------
// Landlock: the ruleset's paths (the supervisor's, opened per command on
// the host) and the view's (the init's, opened in the new mount namespace).

static int ll_abi;
static struct ll_ruleset_attr ll_attr;
static size_t ll_attr_size;
static uint64_t ll_handled;

struct rule {
	const char *path;
	uint64_t access;
};
static struct rule sup_rules[4096];
static int nsup_rules;
static struct rule view_rules[32];
static int nview_rules;

static void add_rule(struct rule *list, int *n, int cap, const char *path, uint64_t access, int is_dir) {
	if (*n >= cap) return;
	access &= ll_handled;
	if (!is_dir) access &= LL_FS_FILE;
	list[(*n)++] = (struct rule){xstrdup(path), access};
}

// fill_rules lists the entries of dir (no symlinks, as the derivation's
// listings) as read rules until the supervisor's list holds want.
static void fill_rules(const char *dir, int want, const char *const *skip) {
	DIR *d = opendir(dir);
	if (!d) return;
	struct dirent *e;
	while (nsup_rules < want && (e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
		int skipped = 0;
		for (int i = 0; skip && skip[i] && !skipped; i++) skipped = strcmp(e->d_name, skip[i]) == 0;
		if (skipped) continue;
		char p[MAX_PATH];
		pathf(p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", e->d_name);
		struct stat st;
		if (lstat(p, &st) < 0 || S_ISLNK(st.st_mode)) continue;
		add_rule(sup_rules, &nsup_rules, want, p, LL_FS_READ, S_ISDIR(st.st_mode));
	}
	closedir(d);
}

static void build_rules(int want) {
	ll_abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (ll_abi < 1) die("Landlock is not available (%s)", strerror(errno));
	ll_handled = (1ULL << 13) - 1;
	if (ll_abi >= 2) ll_handled |= LL_FS_REFER;
	if (ll_abi >= 3) ll_handled |= LL_FS_TRUNCATE;
	if (ll_abi >= 5) ll_handled |= LL_FS_IOCTL_DEV;
	// Network off, with a net namespace of the command's own: TCP and UDP
	// ports unhandled (landlock.Options.OwnLoopback); abstract unix
	// sockets and signals scoped (ABI 6).
	ll_attr = (struct ll_ruleset_attr){.handled_access_fs = ll_handled};
	ll_attr_size = 8;
	if (ll_abi >= 6) {
		ll_attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		ll_attr_size = sizeof ll_attr;
	}
	// The supervisor's: / itself, the writable roots, the caches' upper
	// layers, the devices, then listed entries (dsh lists /, /etc, $HOME, ...).
	add_rule(sup_rules, &nsup_rules, want, "/", LL_FS_READ_DIR, 1);
	for (int k = 0; k < nwritable; k++) add_rule(sup_rules, &nsup_rules, want, writable_roots[k], ll_handled, 1);
	for (int k = 0; k < N_OVERLAYS; k++) add_rule(sup_rules, &nsup_rules, want, ov_upper[k], ll_handled, 1);
	for (int k = 0; k < N_CACHEBINDS; k++) add_rule(sup_rules, &nsup_rules, want, bind_upper[k], ll_handled, 1);
	for (int k = 0; k < 6; k++)
		if (have_device[k]) add_rule(sup_rules, &nsup_rules, want, devices[k], LL_FS_FILE, 0);
	if (have_ptmx_bind) add_rule(sup_rules, &nsup_rules, want, "/dev/ptmx", LL_FS_PTY, 0);
	static const char *const root_skip[] = {"dev", "etc", "proc", "tmp", NULL};
	fill_rules("/", want, root_skip);
	fill_rules("/etc", want, NULL);
	fill_rules("/usr", want, NULL);
	fill_rules("/usr/lib", want, NULL);
	fill_rules("/usr/share", want, NULL);
	if (nsup_rules < want) die("found only %d paths for %d Landlock rules", nsup_rules, want);
	// The init's, on paths of the mount view.
	for (int k = 0; k < N_OVERLAYS; k++) add_rule(view_rules, &nview_rules, 32, ov_dir[k], ll_handled, 1);
	for (int k = 0; k < N_CACHEBINDS; k++) add_rule(view_rules, &nview_rules, 32, bind_dir[k], ll_handled, 1);
	add_rule(view_rules, &nview_rules, 32, cred_target, LL_FS_READ_FILE, 0);
	add_rule(view_rules, &nview_rules, 32, "/dev/pts", LL_FS_PTY, 1);
	if (have_ptmx_bind) add_rule(view_rules, &nview_rules, 32, "/dev/ptmx", LL_FS_PTY & ~LL_FS_READ_DIR, 0);
	add_rule(view_rules, &nview_rules, 32, "/proc", LL_FS_READ, 1);
}

// ll_add opens path (O_PATH) and adds it to ruleset: what the supervisor's
// addPathRule and the runner's "l" step do. It returns 0 or an errno.
static int ll_add(int ruleset, const struct rule *r) {
	struct ll_path_beneath pb = {.allowed_access = r->access, .parent_fd = open(r->path, O_PATH | O_CLOEXEC)};
	if (pb.parent_fd < 0) return errno;
	int rc = (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
	int e = errno;
	close(pb.parent_fd);
	return rc < 0 ? e : 0;
}

// ---------------------------------------------------------------------------
// seccomp: dsh's program (-F FILE: the raw BPF, which command-floor.sh extracts from
// sandbox/seccomp/programs_linux_amd64.go), or a synthetic one of the same
// length that routes write-like calls to the listener.

static struct sock_filter *bpf;
static unsigned short bpf_len;

static void load_bpf_file(const char *path) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) die("%s: %s", path, strerror(errno));
	static struct sock_filter buf[BPF_MAXINSNS + 1];
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	if (n <= 0 || n % (ssize_t)sizeof(struct sock_filter) || n > (ssize_t)(BPF_MAXINSNS * sizeof(struct sock_filter)))
		die("%s: not a BPF program (%zd bytes)", path, n);
	bpf = buf;
	bpf_len = (unsigned short)(n / (ssize_t)sizeof(struct sock_filter));
}

// build_synthetic makes a filter of len instructions: the architecture
// check, then the write-like calls to the listener (open and openat only
// when writing, creating or truncating), padded with tests of syscall
// numbers that do not exist, then allow.
static void build_synthetic(int len) {
	static const int notified[] = {SYS_creat, SYS_mkdir, SYS_mkdirat, SYS_mknod, SYS_mknodat, SYS_unlink, SYS_unlinkat, SYS_rmdir,
	                               SYS_rename, SYS_renameat, SYS_renameat2, SYS_link, SYS_linkat, SYS_symlink, SYS_symlinkat,
	                               SYS_chmod, SYS_fchmod, SYS_fchmodat, SYS_truncate, SYS_openat2, SYS_bind, SYS_connect,
	                               SYS_sendto, SYS_sendmsg, SYS_sendmmsg};
	const int nn = (int)(sizeof notified / sizeof notified[0]);
	static struct sock_filter f[BPF_MAXINSNS];
	int head = 3, open_checks = 2 * 3, tail = 3;
	// (Jumps are 8-bit: every instruction must reach the returns at the end.)
	if (len < head + nn + open_checks + tail || len > 256) die("synthetic filter: bad length %d", len);
	int pad = len - head - nn - open_checks - tail, i = 0;
	// Returns at the end: [len-3] allow, [len-2] notify, [len-1] kill.
	const int allow = len - 3, notify = len - 2, kill = len - 1;
#define J(k, to_true, to_false) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (unsigned char)((to_true) - i - 1), (unsigned char)((to_false) - i - 1))
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), i++;
	f[i] = (struct sock_filter)J(AUDIT_ARCH_X86_64, i + 1, kill), i++;
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)), i++;
	// open (flags: args[1]) and openat (args[2]): each an equality test, a
	// load of its flags and a bit test of O_ACCMODE|O_CREAT|O_TRUNC.
	const int open_nr[2] = {SYS_open, SYS_openat}, open_arg[2] = {1, 2};
	for (int k = 0; k < 2; k++) {
		int next = i + 3;
		f[i] = (struct sock_filter)J(open_nr[k], i + 1, next), i++;
		f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[open_arg[k]])), i++;
		f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_ACCMODE | O_CREAT | O_TRUNC, (unsigned char)(notify - i - 1),
		                                    (unsigned char)(allow - i - 1)), i++;
	}
	for (int k = 0; k < nn; k++) f[i] = (struct sock_filter)J(notified[k], notify, i + 1), i++;
	for (int k = 0; k < pad; k++) f[i] = (struct sock_filter)J(0x40000000u + 1000u + (unsigned)k, notify, i + 1), i++;
#undef J
	f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
	f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	if (i != len) die("synthetic filter: %d instructions, want %d", i, len);
	bpf = f;
	bpf_len = (unsigned short)len;
}

// ---------------------------------------------------------------------------
// The notifier: a thread of the parent that receives each command's listener
// (SCM_RIGHTS on ctrl_sup), acknowledges it, and answers every notification
// with CONTINUE. It never allocates, so that the processes the parent clones
// may use the C library freely.

static int ctrl_sup = -1, ctrl_cmd = -1; // the notifier's end, the commands' end
static atomic_llong notifications;
static size_t notif_size = sizeof(struct seccomp_notif), resp_size = sizeof(struct seccomp_notif_resp);

static void *notifier(void *arg) {
	(void)arg;
	enum { MAXL = 16 };
	int lfd[MAXL], nl = 0;
	static _Thread_local union {
		struct seccomp_notif n;
		char pad[512];
	} req;
	static _Thread_local union {
		struct seccomp_notif_resp r;
		char pad[512];
	} resp;
	for (;;) {
		struct pollfd p[1 + MAXL];
		p[0] = (struct pollfd){.fd = ctrl_sup, .events = POLLIN};
		for (int i = 0; i < nl; i++) p[1 + i] = (struct pollfd){.fd = lfd[i], .events = POLLIN};
		if (poll(p, (nfds_t)(1 + nl), -1) < 0) {
			if (errno == EINTR) continue;
			return NULL;
		}
		int polled = nl; // a listener received below was not in this poll
		if (p[0].revents & POLLIN) {
			char m[64];
			union {
				char buf[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} c;
			struct iovec iov = {m, sizeof m};
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
			ssize_t n = recvmsg(ctrl_sup, &mh, MSG_CMSG_CLOEXEC);
			if (n <= 0) return NULL;
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			if (cm && cm->cmsg_type == SCM_RIGHTS) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm), sizeof fd);
				if (nl < MAXL)
					lfd[nl++] = fd;
				else
					close(fd);
			}
			send(ctrl_sup, "k", 1, MSG_NOSIGNAL); // the acknowledgement
		}
		for (int i = polled - 1; i >= 0; i--) {
			short ev = p[1 + i].revents;
			if (ev & POLLIN) {
				memset(&req, 0, notif_size);
				if (ioctl(lfd[i], SECCOMP_IOCTL_NOTIF_RECV, &req) == 0) {
					memset(&resp, 0, resp_size);
					resp.r.id = req.n.id;
					resp.r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
					ioctl(lfd[i], SECCOMP_IOCTL_NOTIF_SEND, &resp);
					atomic_fetch_add(&notifications, 1);
				}
			} else if (ev & (POLLHUP | POLLERR | POLLNVAL)) {
				// No process uses the filter any more.
				close(lfd[i]);
				lfd[i] = lfd[--nl];
			}
		}
	}
}

// start_notifier makes this process's control socket and notifier thread
// (the session's, and each throughput worker's).
static void start_notifier(void) {
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) die("socketpair: %s", strerror(errno));
	ctrl_sup = sp[0], ctrl_cmd = sp[1];
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) == 0) {
		if (sz.seccomp_notif > notif_size) notif_size = sz.seccomp_notif;
		if (sz.seccomp_notif_resp > resp_size) resp_size = sz.seccomp_notif_resp;
	}
	if (notif_size > 512 || resp_size > 512) die("seccomp notification structures too large");
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, notifier, NULL)) die("pthread_create");
}

// ---------------------------------------------------------------------------
// The cgroup (v1): this process's own group in each hierarchy, and the
// command's made under it.

static const char *cg_ctrl[] = {"pids", "memory", "cpu", "cpuacct", "freezer"};
#define NCG 5
static char cg_own[NCG][MAX_PATH], cg_dir[NCG][MAX_PATH];
// cg_fd holds each cg_own open, from before any runner moves: variant 6's
// session lives in its read-only view, but, like dsh's supervisor outside
// the view, makes the group through these, on the host's mounts.
static int cg_fd[NCG];
static char mem_limit[32];
static int cg_memsw;

// cg_find sets cg_own from /proc/self/cgroup and the cgroup mounts of
// /proc/self/mountinfo (limits.ownV1Paths).
static void cg_find(void) {
	for (int c = 0; c < NCG; c++) {
		char own[MAX_PATH] = "", line[4096];
		FILE *f = fopen("/proc/self/cgroup", "re");
		if (!f) die("/proc/self/cgroup: %s", strerror(errno));
		while (fgets(line, sizeof line, f)) {
			char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
			if (!b) continue;
			*b = 0;
			line[strcspn(line, "\n")] = 0;
			b[1 + strcspn(b + 1, "\n")] = 0;
			for (char *save = NULL, *t = strtok_r(a + 1, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (!strcmp(t, cg_ctrl[c])) snprintf(own, sizeof own, "%s", b + 1);
		}
		fclose(f);
		if (!own[0]) die("no cgroup v1 %s hierarchy (is this cgroup v1?)", cg_ctrl[c]);
		f = fopen("/proc/self/mountinfo", "re");
		while (f && fgets(line, sizeof line, f)) {
			char root[MAX_PATH], mp[MAX_PATH], fs[64], opts[1024];
			char *dash = strstr(line, " - ");
			if (!dash || sscanf(line, "%*s %*s %*s %511s %511s", root, mp) != 2 || sscanf(dash + 3, "%63s %*s %1023s", fs, opts) != 2) continue;
			if (strcmp(fs, "cgroup")) continue;
			int has = 0;
			for (char *save = NULL, *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save)) has |= !strcmp(t, cg_ctrl[c]);
			if (!has) continue;
			const char *rel = own + (under(own, root) && strcmp(root, "/") ? strlen(root) : 0);
			pathf(cg_own[c], "%s%s", mp, strcmp(rel, "/") ? rel : "");
		}
		if (f) fclose(f);
		if (!cg_own[c][0]) die("cgroup v1 %s: not mounted", cg_ctrl[c]);
		if ((cg_fd[c] = open(cg_own[c], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) die("%s: %s", cg_own[c], strerror(errno));
	}
	// The default limits (modes.DefaultLimits): 4096 pids, half the memory,
	// swap included where it is accounted.
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	if (!f || fscanf(f, "MemTotal: %llu kB", &kb) != 1) die("/proc/meminfo");
	fclose(f);
	snprintf(mem_limit, sizeof mem_limit, "%llu", kb * 1024 / 2);
	char p[MAX_PATH];
	pathf(p, "%s/memory.memsw.limit_in_bytes", cg_own[1]);
	cg_memsw = access(p, F_OK) == 0;
}

// cg_create makes the command's group and opens its tasks files (the runner
// joins by writing "0" to each). It returns 0 or -1.
// cg_write writes data to the file rel under cg_fd[c].
static int cg_write(int c, const char *rel, const char *data) {
	int fd = openat(cg_fd[c], rel, O_WRONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	ssize_t n = write(fd, data, strlen(data));
	close(fd);
	return n == (ssize_t)strlen(data) ? 0 : -1;
}

static int cg_create(int *tasks) {
	char p[MAX_PATH], cur[64];
	for (int c = 0; c < NCG; c++) {
		pathf(cg_dir[c], "dsh-command-floor-%d-%d-%d-%u", (int)main_pid, runner_kind, (int)getpid(), cmd_seq);
		if (mkdirat(cg_fd[c], cg_dir[c], 0755) < 0) return -1;
	}
	// What the cgroup library's Set does for these limits: read the memory
	// limit, write it (and memsw's), write pids.max.
	pathf(p, "%s/memory.limit_in_bytes", cg_dir[1]);
	int fd = openat(cg_fd[1], p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, cur, sizeof cur) < 0) return -1;
	close(fd);
	if (cg_write(1, p, mem_limit) < 0) return -1;
	pathf(p, "%s/memory.memsw.limit_in_bytes", cg_dir[1]);
	if (cg_memsw && cg_write(1, p, mem_limit) < 0) return -1;
	pathf(p, "%s/pids.max", cg_dir[0]);
	if (cg_write(0, p, "4096") < 0) return -1;
	for (int c = 0; c < NCG; c++) {
		pathf(p, "%s/tasks", cg_dir[c]);
		if ((tasks[c] = openat(cg_fd[c], p, O_WRONLY | O_CLOEXEC)) < 0) return -1;
	}
	return 0;
}

static int cg_busy_retries;

static void cg_remove(void) {
	for (int c = 0; c < NCG; c++) {
		for (int t = 0; unlinkat(cg_fd[c], cg_dir[c], AT_REMOVEDIR) < 0; t++) {
			if (errno != EBUSY || t == 1000) die("rmdir %s: %s", cg_dir[c], strerror(errno));
			cg_busy_retries++;
			usleep(100);
		}
	}
}

// ---------------------------------------------------------------------------
// The command's processes (in the clone: only system calls and plain C).

static char *cmd_argv[4];

__attribute__((noreturn)) static void child_fail(const char *what, const char *arg, int e) {
	dprintf(2, "command-floor: %s %s: %s\n", what, arg ? arg : "", strerror(e));
	_exit(120);
}

static pid_t raw_fork(unsigned long flags) { return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL); }

// send_listener is the helper's part (runner_filter_linux.c): it shares the
// command's descriptor table, takes the listener's number from the pipe,
// sends it to the notifier and waits for the acknowledgement.
__attribute__((noreturn)) static void send_listener(int rd) {
	int lfd;
	if (read(rd, &lfd, sizeof lfd) != sizeof lfd || lfd < 0) _exit(1);
	char m = 'l', cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {&m, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &lfd, sizeof lfd);
	if (sendmsg(ctrl_cmd, &mh, MSG_NOSIGNAL) < 0) _exit(2);
	char ack;
	_exit(recv(ctrl_cmd, &ack, 1, 0) == 1 ? 0 : 3);
}

// load_filter loads the seccomp program with a listener and hands the
// listener over by a helper (the command cannot: its sendmsg is routed to
// the notifier, which does not hold the listener yet).
static void load_filter(void) {
	int np[2];
	if (pipe2(np, O_CLOEXEC) < 0) child_fail("pipe", NULL, errno);
	pid_t helper = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, NULL);
	if (helper < 0) child_fail("clone the listener's helper", NULL, errno);
	if (helper == 0) send_listener(np[0]);
	struct sock_fprog prog = {.len = bpf_len, .filter = bpf};
	int lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	int e = errno;
	if (write(np[1], &lfd, sizeof lfd) != sizeof lfd) child_fail("pipe", NULL, errno);
	int st;
	while (waitpid(helper, &st, 0) < 0 && errno == EINTR) {
	}
	if (lfd < 0) child_fail("seccomp", NULL, e);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) child_fail("hand the listener over", NULL, EPIPE);
	close(lfd), close(np[0]), close(np[1]);
}

// drop_capabilities: the bounding set, the ambient set, then every set
// (dshr_drop_capabilities).
static void drop_capabilities(void) {
	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) break;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0) child_fail("capset", NULL, errno);
}

// init is pid 1 of the command's pid namespace: it joins the cgroup, makes
// the mount view, confines itself, forks the command and reaps everything.
__attribute__((noreturn)) static void init(int v, const int *tasks, int ruleset) {
	if (v >= V_CGROUP) {
		for (int c = 0; c < NCG; c++) {
			if (write(tasks[c], "0", 1) != 1) child_fail("join the cgroup", cg_ctrl[c], errno);
			close(tasks[c]);
		}
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) child_fail("pdeathsig", NULL, errno);
	if (v >= V_VIEW && v != V_SPID) {
		for (int i = 0; i < nview; i++) {
			const struct mnt *m = &view[i];
			if (v == V_NOOVL && m->fs && !strcmp(m->fs, "overlay")) continue;
			if (session_held(v) && !per_command(m->part)) continue; // the session's view has it
			if (mount(m->src, m->tgt, m->fs, m->flags, m->data) < 0) child_fail("mount", m->tgt, errno);
		}
		// Re-enter the working directory, in the new mounts.
		if (chdir(opt_ws) < 0) child_fail("chdir", opt_ws, errno);
	}
	if (v >= V_LANDLOCK) {
		for (int i = 0; i < nview_rules && v != V_SPID; i++) {
			int e = ll_add(ruleset, &view_rules[i]);
			if (e) child_fail("landlock rule", view_rules[i].path, e);
		}
		drop_capabilities();
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) child_fail("dumpable", NULL, errno);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) child_fail("no_new_privs", NULL, errno);
		if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) child_fail("landlock_restrict_self", NULL, errno);
		close(ruleset);
	}
	pid_t cmd = v == V_SPID ? 0 : raw_fork(0); // variant 7: this process is the command
	if (cmd < 0) child_fail("fork", NULL, errno);
	if (cmd == 0) {
		setsid();
		if (v >= V_SECCOMP) load_filter();
		execve(cmd_argv[0], cmd_argv, environ);
		child_fail("execve", cmd_argv[0], errno);
	}
	int st = 0;
	while (waitpid(cmd, &st, 0) < 0 && errno == EINTR) {
	}
	// What the command left: killed at once (kill(-1) in a pid namespace
	// is everyone but its init), and reaped.
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

// ---------------------------------------------------------------------------
// One command of a sandboxed variant (1-6), from the parent's side: the
// supervisor's files and ruleset, the clone, the wait, the cleanup. It
// returns the command's exit status.

// make_credential_copy makes the credential file's sanitized copy (per
// command, or once in variant 6's session).
static void make_credential_copy(void) {
	pathf(cred_dir, "/dev/shm/dsh-command-floor-credentials-%d-%d-%d-%u", (int)main_pid, runner_kind, (int)getpid(), cmd_seq);
	pathf(cred_file, "%s/npmrc", cred_dir);
	if (mkdir(cred_dir, 0700) < 0) die("mkdir %s: %s", cred_dir, strerror(errno));
	int fd = open(cred_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "registry=https://registry.npmjs.org/\n", 37) != 37) die("credential copy: %s", strerror(errno));
	close(fd);
}

// session_ruleset is variant 7's ruleset, made at its first command by the
// session's pid 1, in its view, the view's rules added, and kept.
static int session_ruleset(void) {
	static int fd = -1;
	if (fd >= 0) return fd;
	fd = (int)syscall(SYS_landlock_create_ruleset, &ll_attr, ll_attr_size, 0);
	if (fd < 0) die("landlock_create_ruleset: %s", strerror(errno));
	for (int i = 0; i < nsup_rules; i++) {
		int e = ll_add(fd, &sup_rules[i]);
		if (e) die("landlock rule %s: %s", sup_rules[i].path, strerror(e));
	}
	for (int i = 0; i < nview_rules; i++) {
		int e = ll_add(fd, &view_rules[i]);
		if (e) die("landlock rule %s: %s", view_rules[i].path, strerror(e));
	}
	return fd;
}

static int run_sandboxed(int v) {
	int tasks[NCG], ruleset = -1;
	cmd_seq++;
	int overlays = v >= V_VIEW && v != V_NOOVL && !session_held(v) && in_view(P_OVERLAYS);
	int creds = v >= V_VIEW && !session_held(v) && in_view(P_CREDS);
	if (overlays) {
		// The overlays' fresh work directories.
		for (int k = 0; k < N_OVERLAYS; k++) {
			pathf(ov_wdir[k], "%s/w-%d-%d-%u", ov_work[k], runner_kind, (int)getpid(), cmd_seq);
			if (mkdir(ov_wdir[k], 0700) < 0) die("mkdir %s: %s", ov_wdir[k], strerror(errno));
			snprintf(ov_data[k], sizeof ov_data[k], "lowerdir=%s,upperdir=%s,workdir=%s,userxattr,volatile", ov_dir[k], ov_upper[k], ov_wdir[k]);
		}
	}
	if (creds) make_credential_copy();
	if (v == V_SPID) {
		ruleset = session_ruleset();
	} else if (v >= V_LANDLOCK) {
		ruleset = (int)syscall(SYS_landlock_create_ruleset, &ll_attr, ll_attr_size, 0);
		if (ruleset < 0) die("landlock_create_ruleset: %s", strerror(errno));
		for (int i = 0; i < nsup_rules; i++) {
			int e = ll_add(ruleset, &sup_rules[i]);
			if (e) die("landlock rule %s: %s", sup_rules[i].path, strerror(e));
		}
	}
	if (v >= V_CGROUP && cg_create(tasks) < 0) die("cgroup: %s", strerror(errno));
	pid_t p = raw_fork(v == V_SPID ? 0 : CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID);
	if (p < 0) die("clone: %s", strerror(errno));
	if (p == 0) init(v, tasks, ruleset);
	if (ruleset >= 0 && v != V_SPID) close(ruleset);
	if (v >= V_CGROUP)
		for (int c = 0; c < NCG; c++) close(tasks[c]);
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR) die("waitpid: %s", strerror(errno));
	if (v == V_SPID) {
		// What the command left is in its group (no init to kill(-1) it):
		// the group listed, and the orphans this pid 1 inherited reaped.
		char p[MAX_PATH], buf[256];
		pathf(p, "%s/cgroup.procs", cg_dir[0]);
		int fd = openat(cg_fd[0], p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, buf, sizeof buf) != 0) die("variant 7: the command's group is not empty");
		close(fd);
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
	}
	if (v >= V_CGROUP) cg_remove();
	for (int k = 0; k < N_OVERLAYS && overlays; k++)
		if (rm_tree(AT_FDCWD, ov_wdir[k]) < 0) die("remove %s: %s", ov_wdir[k], strerror(errno));
	if (creds && (unlink(cred_file) < 0 || rmdir(cred_dir) < 0)) die("remove %s: %s", cred_dir, strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// run_host runs one command of bare or bwrap from the main process.
static char *bwrap_argv[20];

static int run_host(int v) {
	char **argv = v == V_BARE ? cmd_argv : bwrap_argv;
	pid_t p = raw_fork(0);
	if (p < 0) die("fork: %s", strerror(errno));
	if (p == 0) {
		execvp(argv[0], argv);
		child_fail("execvp", argv[0], errno);
	}
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR) die("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// ---------------------------------------------------------------------------
// Batches and throughput. A batch runs count commands of one variant one
// after the other and times each; throughput runs workers processes of one
// variant, total commands in all, and times the whole.

struct result {
	int status;           // 0, or the first nonzero exit status
	int n;
	long long self_ns, child_ns, wall_ns;
	long long notifs;
	long long t[MAX_BATCH];
};

static int run_one(int v) { return v == V_BARE || v == V_BWRAP ? run_host(v) : run_sandboxed(v); }

static void batch(int v, int count, struct result *r) {
	memset(r, 0, sizeof *r);
	long long s0 = cpu_ns(RUSAGE_SELF), c0 = cpu_ns(RUSAGE_CHILDREN), n0 = atomic_load(&notifications);
	for (int i = 0; i < count; i++) {
		long long t0 = now_ns();
		int st = run_one(v);
		r->t[i] = now_ns() - t0;
		if (st && !r->status) r->status = st;
	}
	r->n = count;
	r->self_ns = cpu_ns(RUSAGE_SELF) - s0;
	r->child_ns = cpu_ns(RUSAGE_CHILDREN) - c0;
	r->notifs = atomic_load(&notifications) - n0;
}

static void throughput(int v, int workers, int total, struct result *r) {
	memset(r, 0, sizeof *r);
	long long s0 = cpu_ns(RUSAGE_SELF), c0 = cpu_ns(RUSAGE_CHILDREN), t0 = now_ns();
	pid_t pids[256];
	if (workers > 256) die("too many workers");
	for (int w = 0; w < workers; w++) {
		pid_t p = pids[w] = fork();
		if (p < 0) die("fork: %s", strerror(errno));
		if (p == 0) {
			// A worker: its own notifier (the thread did not survive the fork).
			if (v >= V_SECCOMP) start_notifier();
			int mine = total / workers + (w < total % workers), bad = 0;
			for (int i = 0; i < mine; i++) bad |= run_one(v) != 0;
			_exit(bad);
		}
	}
	for (int w = 0; w < workers; w++) {
		int st;
		while (waitpid(pids[w], &st, 0) < 0)
			if (errno != EINTR) die("waitpid: %s", strerror(errno));
		if (!WIFEXITED(st) || WEXITSTATUS(st)) r->status = 1;
	}
	r->wall_ns = now_ns() - t0;
	r->n = total;
	r->self_ns = cpu_ns(RUSAGE_SELF) - s0;
	r->child_ns = cpu_ns(RUSAGE_CHILDREN) - c0;
}

// ---------------------------------------------------------------------------
// The runners: two small processes forked by the main process before it
// allocates anything, which run the commands when it asks (struct request
// on a socket) and answer with a struct result. The host runner runs bare
// and bwrap; the session runs variants 1-5 in the namespaces it made once:
// a new user namespace (uid and gid 0 mapped to themselves), and in it new
// UTS and net namespaces, the net namespace's loopback up. Both fork their
// commands alike, from a process of the same small size.

struct request {
	int kind; // 0 batch, 1 throughput, 2 quit
	int v, count, workers;
};

enum { HOST, SESSION, SVIEW, SPID, NRUNNERS };
static int runner_sock[NRUNNERS] = {-1, -1, -1, -1};
static pid_t runner_pid[NRUNNERS];

static void loopback_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) die("loopback: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) die("loopback up: %s", strerror(errno));
	close(s);
}

// session_view is variant 6's session: before its notifier thread starts
// (a process that shares its filesystem context with a thread cannot
// unshare a mount namespace), it moves to a mount namespace of its own and
// makes in it every part of the view that does not depend on a command's
// pid namespace, the overlays with a work directory each and the credential
// copy included, once. Each command's clone then copies that view, and its
// init mounts only the parts per_command names. (The mounts go with the
// namespace when the session ends; main's cleanup removes the files.)
static void session_view(int all) {
	if (!all && unshare(CLONE_NEWNS) < 0) die("session mount namespace: %s", strerror(errno));
	for (int k = 0; k < N_OVERLAYS && in_view(P_OVERLAYS); k++) {
		pathf(ov_wdir[k], "%s/w-session-%d", ov_work[k], runner_kind);
		if (mkdir(ov_wdir[k], 0700) < 0) die("mkdir %s: %s", ov_wdir[k], strerror(errno));
		snprintf(ov_data[k], sizeof ov_data[k], "lowerdir=%s,upperdir=%s,workdir=%s,userxattr,volatile", ov_dir[k], ov_upper[k], ov_wdir[k]);
	}
	if (in_view(P_CREDS)) make_credential_copy();
	for (int i = 0; i < nview; i++) {
		const struct mnt *m = &view[i];
		if (!all && m->part >= 0 && per_command(m->part)) continue;
		if (mount(m->src, m->tgt, m->fs, m->flags, m->data) < 0) die("session view: mount %s: %s", m->tgt, strerror(errno));
	}
	if (chdir(opt_ws) < 0) die("chdir %s: %s", opt_ws, strerror(errno));
}

// session_pid is variant 7's session: new pid, mount and IPC namespaces,
// whose pid 1 (a child: the caller waits for it and ends with it) goes on
// as the session, makes the whole view (its /proc that of the new pid
// namespace) and runs the commands.
static void session_pid(void) {
	if (unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) < 0) die("session pid namespace: %s", strerror(errno));
	pid_t p = fork();
	if (p < 0) die("fork: %s", strerror(errno));
	if (p > 0) {
		int st;
		while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
		}
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	session_view(1);
}

static void enter_session(int which) {
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER) < 0) die("user namespace: %s", strerror(errno));
	char map[64];
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0) die("uid_map: %s", strerror(errno));
	if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) die("setgroups: %s", strerror(errno));
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/gid_map", map) < 0) die("gid_map: %s", strerror(errno));
	if (unshare(CLONE_NEWUTS | CLONE_NEWNET) < 0) die("uts and net namespaces: %s", strerror(errno));
	loopback_up();
	if (which == SVIEW) session_view(0);
	if (which == SPID) session_pid();
	start_notifier();
}

__attribute__((noreturn)) static void runner_main(int which, int sock) {
	runner_kind = which;
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (which != HOST) enter_session(which);
	static struct result r;
	struct request q;
	while (recv(sock, &q, sizeof q, 0) == sizeof q && q.kind != 2) {
		if (q.kind == 0)
			batch(q.v, q.count, &r);
		else
			throughput(q.v, q.workers, q.count, &r);
		if (send(sock, &r, sizeof r, 0) != sizeof r) die("runner: send: %s", strerror(errno));
	}
	_exit(0);
}

static void start_runner(int which) {
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) die("socketpair: %s", strerror(errno));
	int sz = 1 << 20;
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	runner_pid[which] = fork();
	if (runner_pid[which] < 0) die("fork: %s", strerror(errno));
	if (runner_pid[which] == 0) {
		close(sp[0]);
		for (int k = 0; k < NRUNNERS; k++)
			if (runner_sock[k] >= 0) close(runner_sock[k]);
		runner_main(which, sp[1]);
	}
	close(sp[1]);
	runner_sock[which] = sp[0];
}

// ask has the runner of variant v run a request: a batch (kind 0) or a
// throughput run (kind 1).
static void ask(int kind, int v, int count, int workers, struct result *r) {
	int sock = runner_sock[v == V_BARE || v == V_BWRAP ? HOST : v == V_SVIEW ? SVIEW : v == V_SPID ? SPID : SESSION];
	struct request q = {kind, v, count, workers};
	if (send(sock, &q, sizeof q, 0) != sizeof q) die("send to a runner: %s", strerror(errno));
	if (recv(sock, r, sizeof *r, 0) != sizeof *r) die("a runner failed (see above)");
}

// ---------------------------------------------------------------------------
// Statistics and output.

static int cmp_ll(const void *a, const void *b) {
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

static double pct(long long *v, int n, double p) {
	if (n == 0) return 0;
	double i = p * (n - 1);
	int lo = (int)i;
	return lo + 1 < n ? v[lo] + (i - lo) * (double)(v[lo + 1] - v[lo]) : (double)v[lo];
}

static void usage(void) {
	fprintf(stderr,
	        "usage: command-floor [options]\n"
	        "  -n N        commands per variant (300)\n"
	        "  -b B        commands per batch, the unit of interleaving (10)\n"
	        "  -W K        warm-up batches per variant (1)\n"
	        "  -t W:T      throughput: W workers, T commands in all (4:400); 0 leaves it out\n"
	        "  -r R        throughput repetitions (3)\n"
	        "  -V LIST     variants, comma-separated, of 0-5, 5o (5 without the cache overlays), 6 (5 with the\n"
	        "              view made once per session), 7 (6 with the pid namespace, /proc and the\n"
	        "              ruleset made once per session too) and bwrap (all)\n"
	        "  -T LIST     the throughput run's variants (0,5,5o,6,7,bwrap)\n"
	        "  -O PARTS    leave parts of the mount view out (to see what each costs), of: overlays,\n"
	        "              cachebinds, roots, masks, creds, devices, readonly, devpts, proc, procglobals\n"
	        "  -w WS       workspace (a new directory in /tmp)\n"
	        "  -s DIR      where the scratch tree goes (/var/tmp; not under /tmp: the view binds /tmp)\n"
	        "  -F FILE     the seccomp program, raw BPF (dsh's; else a synthetic one)\n"
	        "  -S LEN      the synthetic program's length (235)\n"
	        "  -c BASH     the shell (/bin/bash)   -e SCRIPT  its -c argument (true)\n"
	        "  -x BWRAP    bubblewrap (bwrap)     -o FILE    per-command wall times, CSV\n"
	        "  -k          check: each variant once, output shown, no timing\n");
	exit(2);
}

static int parse_variants(const char *s) {
	int mask = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "bwrap"))
			mask |= 1 << V_BWRAP;
		else if (!strcmp(t, "5o"))
			mask |= 1 << V_NOOVL;
		else if (!strcmp(t, "6"))
			mask |= 1 << V_SVIEW;
		else if (!strcmp(t, "7"))
			mask |= 1 << V_SPID;
		else if (t[0] >= '0' && t[0] <= '5' && !t[1])
			mask |= 1 << (t[0] - '0');
		else
			usage();
	}
	return mask;
}

static void parse_omit(const char *s) {
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = 0;
		while (k < NPARTS && strcmp(t, part_name[k])) k++;
		if (k == NPARTS) usage();
		view_omit |= 1 << k;
	}
}

static char ws_made[MAX_PATH];

static void cleanup(void) {
	if (getpid() != main_pid) return; // a runner or worker that failed: the main process cleans up
	for (int k = 0; k < NRUNNERS; k++) {
		if (runner_sock[k] < 0) continue;
		struct request q = {2, 0, 0, 0};
		send(runner_sock[k], &q, sizeof q, 0);
		waitpid(runner_pid[k], NULL, 0);
	}
	if (scratch[0]) rm_tree(AT_FDCWD, scratch);
	// The sessions' credential copies (variants 6 and 7), named after this
	// process.
	char prefix[64];
	snprintf(prefix, sizeof prefix, "dsh-command-floor-credentials-%d-", (int)main_pid);
	int shm = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = shm >= 0 ? fdopendir(shm) : NULL;
	for (struct dirent *e; d && (e = readdir(d));)
		if (!strncmp(e->d_name, prefix, strlen(prefix))) rm_tree(shm, e->d_name);
	if (d) closedir(d);
	if (ws_made[0]) rm_tree(AT_FDCWD, ws_made);
}

// on_signal ends the run (^C) with the scratch tree and workspace removed.
static void on_signal(int sig) {
	cleanup();
	_exit(128 + sig);
}

int main(int argc, char **argv) {
	int c;
	while ((c = getopt(argc, argv, "n:b:W:t:r:V:T:O:w:s:F:S:c:e:x:o:kh")) != -1) {
		switch (c) {
		case 'n': opt_n = atoi(optarg); break;
		case 'b': opt_batch = atoi(optarg); break;
		case 'W': opt_warm = atoi(optarg); break;
		case 't':
			opt_workers = atoi(optarg);
			opt_total = strchr(optarg, ':') ? atoi(strchr(optarg, ':') + 1) : opt_total;
			break;
		case 'r': opt_reps = atoi(optarg); break;
		case 'V': opt_vmask = parse_variants(optarg); break;
		case 'T': opt_tmask = parse_variants(optarg); break;
		case 'O': parse_omit(optarg); break;
		case 'w': opt_ws = optarg; break;
		case 's': opt_scratch = optarg; break;
		case 'F': opt_filter = optarg; break;
		case 'S': opt_synthetic = atoi(optarg); break;
		case 'c': opt_bash = optarg; break;
		case 'e': opt_script = optarg; break;
		case 'x': opt_bwrap = optarg; break;
		case 'o': opt_raw = optarg; break;
		case 'k': opt_check = 1; break;
		default: usage();
		}
	}
	if (optind != argc || opt_n < 1 || opt_batch < 1 || opt_batch > MAX_BATCH || opt_warm < 0 || opt_workers < 0 || opt_total < 1 || opt_reps < 1)
		usage();
	if (opt_check) opt_n = 1, opt_batch = 1, opt_warm = 0, opt_workers = 0;
	if (geteuid() != 0) die("run as root (the project's CI does; the cgroup step needs it)");

	// The workspace, its real path (the command's working directory).
	static char ws[MAX_PATH];
	if (!opt_ws) {
		snprintf(ws_made, sizeof ws_made, "/tmp/dsh-command-floor-ws.XXXXXX");
		if (!mkdtemp(ws_made)) die("mkdtemp: %s", strerror(errno));
		opt_ws = ws_made;
	}
	if (!realpath(opt_ws, ws)) die("%s: %s", opt_ws, strerror(errno));
	opt_ws = ws;
	if (chdir(ws) < 0) die("chdir %s: %s", ws, strerror(errno));
	main_pid = getpid();
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	cmd_argv[0] = (char *)opt_bash, cmd_argv[1] = "-c", cmd_argv[2] = (char *)opt_script;
	const char *bw[] = {opt_bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent", "--tmpfs", "/tmp",
	                    "--bind", ws, ws, "--", opt_bash, "-c", opt_script, NULL};
	memcpy(bwrap_argv, bw, sizeof bw);

	// The host's facts, once: writable roots, the scratch tree, the view,
	// the rules, the filter, the cgroup hierarchies.
	writable_roots[nwritable++] = "/dev/shm";
	writable_roots[nwritable++] = "/tmp";
	if (!under(ws, "/tmp") && !under(ws, "/dev/shm")) writable_roots[nwritable++] = ws;
	make_scratch();
	build_view();
	build_rules(SUP_RULES);
	if (opt_filter)
		load_bpf_file(opt_filter);
	else
		build_synthetic(opt_synthetic);
	cg_find();

	printf("command-floor: %d mounts per command (%d host mount points read-only, %d /proc entries); %d Landlock rules (%d + %d), ABI %d; "
	       "seccomp %s, %u instructions; cgroup v1 %s%s\n",
	       nview, nremount_ro, nproc_globals, nsup_rules + nview_rules, nsup_rules, nview_rules, ll_abi, opt_filter ? opt_filter : "synthetic",
	       bpf_len, cg_own[1], cg_memsw ? " (memsw)" : "");
	int nper = 0;
	for (int i = 0; i < nview; i++) nper += view[i].part >= 0 && per_command(view[i].part);
	printf("command-floor: variant 6 makes %d of them once per session, %d per command; variant 7 all %d once per session\n", nview - nper, nper, nview);
	for (int k = 0; k < NPARTS; k++)
		if (!in_view(k)) printf("command-floor: the mount view leaves out: %s\n", part_name[k]);
	fflush(stdout);
	start_runner(HOST);
	start_runner(SESSION);
	int wanted = opt_vmask | (opt_workers > 0 ? opt_tmask : 0);
	if (wanted & (1 << V_SVIEW)) start_runner(SVIEW);
	if (wanted & (1 << V_SPID)) start_runner(SPID);

	int vs[NV], nv = 0;
	for (int v = 0; v < NV; v++)
		if (opt_vmask & (1 << v)) vs[nv++] = v;
	static struct result r;
	if (opt_check) {
		for (int i = 0; i < nv; i++) {
			printf("== %s\n", vname[vs[i]]);
			fflush(stdout);
			ask(0, vs[i], 1, 0, &r);
			printf("-- exit %d, %lld notifications\n", r.status, r.notifs);
			fflush(stdout);
		}
		return 0;
	}

	// Interleaved batches: each round runs a batch of every variant, the
	// order rotated from round to round.
	static long long times[NV][100000];
	int n[NV] = {0};
	long long cpu_self[NV] = {0}, cpu_child[NV] = {0}, busy[NV] = {0}, notifs[NV] = {0};
	int rounds = (opt_n + opt_batch - 1) / opt_batch;
	if (rounds * opt_batch > 100000) die("too many commands");
	for (int round = -opt_warm; round < rounds; round++) {
		for (int j = 0; j < nv; j++) {
			int v = vs[(j + (round < 0 ? 0 : round)) % nv];
			long long b0 = busy_ns();
			ask(0, v, opt_batch, 0, &r);
			long long b1 = busy_ns();
			if (r.status) die("%s: a command failed (status %d)", vname[v], r.status);
			if (round < 0) continue;
			memcpy(&times[v][n[v]], r.t, sizeof r.t[0] * (size_t)r.n);
			n[v] += r.n;
			cpu_self[v] += r.self_ns, cpu_child[v] += r.child_ns, busy[v] += b1 - b0, notifs[v] += r.notifs;
		}
	}
	if (opt_raw) {
		FILE *f = fopen(opt_raw, "we");
		if (!f) die("%s: %s", opt_raw, strerror(errno));
		fprintf(f, "variant,i,wall_ns\n");
		for (int i = 0; i < nv; i++)
			for (int k = 0; k < n[vs[i]]; k++) fprintf(f, "%s,%d,%lld\n", vname[vs[i]], k, times[vs[i]][k]);
		fclose(f);
	}
	double med[NV] = {0}, cpu[NV] = {0};
	printf("\n%-12s %5s %9s %8s %8s %9s %9s %9s %7s %7s %6s\n", "variant", "n", "median_ms", "p25_ms", "p75_ms", "cpu_ms", "(parent", "child)",
	       "busy_ms", "notif", "");
	for (int i = 0; i < nv; i++) {
		int v = vs[i];
		qsort(times[v], (size_t)n[v], sizeof times[v][0], cmp_ll);
		med[v] = pct(times[v], n[v], 0.5) / 1e6;
		cpu[v] = (cpu_self[v] + cpu_child[v]) / 1e6 / n[v];
		printf("%-12s %5d %9.3f %8.3f %8.3f %9.3f %9.3f %9.3f %7.3f %7.2f\n", vname[v], n[v], med[v], pct(times[v], n[v], 0.25) / 1e6,
		       pct(times[v], n[v], 0.75) / 1e6, cpu[v], cpu_self[v] / 1e6 / n[v], cpu_child[v] / 1e6 / n[v], busy[v] / 1e6 / n[v],
		       (double)notifs[v] / n[v]);
	}
	if (opt_vmask & (1 << V_BWRAP)) {
		printf("\nratio to bwrap   %9s %9s %9s\n", "wall", "cpu", "busy");
		for (int i = 0; i < nv; i++) {
			int v = vs[i];
			printf("%-16s %9.2f %9.2f %9.2f\n", vname[v], med[v] / med[V_BWRAP], cpu[v] / cpu[V_BWRAP],
			       (double)busy[v] / n[v] / ((double)busy[V_BWRAP] / n[V_BWRAP]));
		}
	}
	if (cg_busy_retries) printf("(cgroup rmdir retried %d times on EBUSY)\n", cg_busy_retries);
	fflush(stdout);

	// Throughput: workers concurrent, total commands, interleaved repetitions.
	if (opt_workers > 0) {
		int tv[NV], ntv = 0;
		for (int v = 0; v < NV; v++)
			if (opt_tmask & (1 << v)) tv[ntv++] = v;
		printf("\nthroughput: %d workers, %d commands each run\n%-12s %4s %10s %10s %9s %9s\n", opt_workers, opt_total, "variant", "rep", "wall_s", "cmds/s",
		       "cpu_ms", "busy_ms");
		double rate[NV][64];
		int nr = opt_reps > 64 ? 64 : opt_reps;
		for (int rep = 0; rep < nr; rep++) {
			for (int j = 0; j < ntv; j++) {
				int v = tv[j];
				long long b0 = busy_ns();
				ask(1, v, opt_total, opt_workers, &r);
				long long b1 = busy_ns();
				if (r.status) die("%s: a command failed in the throughput run", vname[v]);
				rate[j][rep] = opt_total / (r.wall_ns / 1e9);
				printf("%-12s %4d %10.3f %10.1f %9.3f %9.3f\n", vname[v], rep, r.wall_ns / 1e9, rate[j][rep], (r.self_ns + r.child_ns) / 1e6 / opt_total,
				       (b1 - b0) / 1e6 / opt_total);
				fflush(stdout);
			}
		}
		printf("\nthroughput median of %d   %10s\n", nr, "cmds/s");
		for (int j = 0; j < ntv; j++) {
			double s[64];
			memcpy(s, rate[j], sizeof s[0] * (size_t)nr);
			for (int a = 0; a < nr; a++)
				for (int b = a + 1; b < nr; b++)
					if (s[b] < s[a]) {
						double x = s[a];
						s[a] = s[b], s[b] = x;
					}
			printf("%-24s %10.1f\n", vname[tv[j]], nr % 2 ? s[nr / 2] : (s[nr / 2 - 1] + s[nr / 2]) / 2);
		}
	}
	return 0;
}
