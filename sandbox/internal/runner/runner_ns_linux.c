// The runner's namespaces, its mount view (the supervisor's mount plan),
// dropping capabilities, and the toolchain caches' variables without a view.

#include "runner_linux.h"

// Namespaces the runner created (reported in the ready message).
int dshr_ns_user, dshr_ns_mount, dshr_ns_pid, dshr_ns_net, dshr_ns_ipc, dshr_ns_uts;
char dshr_ns_error[512];

// dshr_caches: a character per toolchain cache of the mount plan, '1'
// mounted, '0' not (reported in the listener and ready messages).
char dshr_caches[129];

static int read_only(const char *path) {
	struct statvfs st;
	return statvfs(path, &st) == 0 && (st.f_flag & ST_RDONLY);
}

static int no_dev(const char *path) {
	struct statvfs st;
	return statvfs(path, &st) == 0 && (st.f_flag & ST_NODEV);
}

// dshr_apply_mounts runs the supervisor's mount plan. It returns 1 when the view
// is complete, 0 when some step failed (the reason is recorded; every step is
// a restriction or neutral, so a partial view is never looser than none).
int dshr_apply_mounts(int from, int *fresh_proc, int ruleset) {
	int ok = 1;
	// skip_rules: the last mount was a cache overlay that failed, so the
	// Landlock rules that follow it (on its inodes) are not added.
	int skip_rules = 0;
	for (int i = from; i < dshr_ntok; i++) {
		int md = strcmp(dshr_tok[i], OP_MOUNT_DATA) == 0;
		if ((md || strcmp(dshr_tok[i], OP_MOUNT) == 0) && i + 5 + md < dshr_ntok) {
			// m SRC TGT FSTYPE FLAGS MODE, md ... DATA
			const char *src = dshr_tok[i + 1], *tgt = dshr_tok[i + 2], *fs = dshr_tok[i + 3], *mode = dshr_tok[i + 5];
			const char *data = md ? dshr_tok[i + 6] : NULL;
			unsigned long flags = strtoul(dshr_tok[i + 4], NULL, 10);
			int cache = strcmp(mode, MODE_CACHE) == 0;
			i += 5 + md;
			if (strcmp(mode, MODE_CACHE_FLAGS) == 0) {
				// The flags of the cache bind just made (a bind takes
				// none of its own); without them the bind goes and the
				// cache stays read-only, as when its bind failed.
				size_t n = strlen(dshr_caches);
				if (skip_rules || n == 0 || dshr_caches[n - 1] != '1') continue;
				if (mount(NULL, tgt, NULL, flags, NULL) == 0) continue;
				if (umount2(tgt, MNT_DETACH) < 0) dshr_fail("mount view: cache %s: %s", tgt, strerror(errno));
				dshr_caches[n - 1] = '0';
				skip_rules = 1;
				continue;
			}
			skip_rules = 0;
			if (strcmp(mode, MODE_PROC) == 0 && !dshr_ns_pid) continue;
			if (mount(*src ? src : NULL, tgt, *fs ? fs : NULL, flags, data) == 0) {
				if (strcmp(mode, MODE_PROC) == 0) *fresh_proc = 1;
				if (cache) strncat(dshr_caches, "1", sizeof dshr_caches - strlen(dshr_caches) - 1);
				continue;
			}
			int e = errno;
			if (cache) {
				// A toolchain cache without its overlay stays read-only
				// (as outside every writable root): less convenient,
				// never looser.
				strncat(dshr_caches, "0", sizeof dshr_caches - strlen(dshr_caches) - 1);
				skip_rules = 1;
				continue;
			}
			if (strcmp(mode, MODE_PROC) == 0) {
				dshr_add_reason("no fresh /proc: %s", strerror(e));
				continue;
			}
			if ((flags & MS_REMOUNT) && (flags & MS_RDONLY) && read_only(tgt)) continue;
			if (strcmp(mode, MODE_SKIP) == 0 && (e == EACCES || e == ENOENT || e == ENOTDIR)) continue;
			dshr_add_reason("mount view: %s %s: %s", (flags & MS_REMOUNT) ? "read-only" : *fs ? fs : "bind", tgt, strerror(e));
			return 0;
		} else if (strcmp(dshr_tok[i], OP_REMOUNT_RO) == 0 && i + 2 < dshr_ntok) {
			// Remount a mount point read-only (flags: what it must keep);
			// tolerant of mounts this uid cannot reach.
			const char *tgt = dshr_tok[i + 1];
			unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | strtoul(dshr_tok[i + 2], NULL, 10);
			i += 2;
			if (mount(NULL, tgt, NULL, flags, NULL) == 0 || (read_only(tgt) && (!(flags & MS_NODEV) || no_dev(tgt)))) continue;
			int e = errno;
			if (e == EACCES || e == ENOENT || e == ENOTDIR) continue;
			dshr_add_reason("mount view: read-only %s: %s", tgt, strerror(e));
			return 0;
		} else if (strcmp(dshr_tok[i], OP_LANDLOCK_RULE) == 0 && i + 2 < dshr_ntok) {
			// l PATH ACCESS: a Landlock rule on a path this view created
			// (the fresh devpts), added before the runner restricts itself.
			const char *path = dshr_tok[i + 1];
			unsigned long long access = strtoull(dshr_tok[i + 2], NULL, 10);
			i += 2;
			if (ruleset < 0 || skip_rules) continue;
			struct landlock_path_beneath {
				unsigned long long allowed_access;
				int parent_fd;
			} __attribute__((packed)) pb = {.allowed_access = access, .parent_fd = open(path, O_PATH | O_CLOEXEC)};
			if (pb.parent_fd < 0) dshr_fail("landlock rule %s: %s", path, strerror(errno));
			if (syscall(SYS_landlock_add_rule, ruleset, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &pb, 0) < 0)
				dshr_fail("landlock rule %s: %s", path, strerror(errno));
			close(pb.parent_fd);
		} else if (strcmp(dshr_tok[i], OP_SAME) == 0 && i + 2 < dshr_ntok) {
			// same FD PATH: FD, a directory the supervisor opened and
			// checked, becomes PATH as this mount namespace sees it — the
			// same inode, reached without a symlink — so that a later step
			// can name it /proc/self/fd/FD (an overlay refuses a layer
			// whose mount belongs to another namespace). Another inode
			// there means the directory was replaced since: fail.
			int fd = atoi(dshr_tok[i + 1]);
			const char *path = dshr_tok[i + 2];
			i += 2;
			struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
			int nfd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
			if (nfd < 0) dshr_fail("%s: %s", path, strerror(errno));
			struct stat held, seen;
			if (fstat(fd, &held) < 0 || fstat(nfd, &seen) < 0) dshr_fail("%s: %s", path, strerror(errno));
			if (held.st_dev != seen.st_dev || held.st_ino != seen.st_ino)
				dshr_fail("%s is not the directory the supervisor checked: it was replaced while the sandbox started", path);
			if (dup3(nfd, fd, O_CLOEXEC) < 0) dshr_fail("%s: %s", path, strerror(errno));
			close(nfd);
		} else if (strcmp(dshr_tok[i], OP_CHECK_RO) == 0 && i + 1 < dshr_ntok) {
			i++;
			if (!read_only(dshr_tok[i])) {
				dshr_add_reason("mount view self-test: %s is still writable", dshr_tok[i]);
				ok = 0;
			}
		} else {
			dshr_fail("runner: malformed mount plan at token %d (%s)", i, dshr_tok[i]);
		}
	}
	return ok;
}

void dshr_drop_capabilities(void) {
	for (int c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL || errno == EPERM) break;
			dshr_fail("drop bounding capability %d: %s", c, strerror(errno));
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		dshr_fail("clear ambient capabilities: %s", strerror(errno));
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0) dshr_fail("capset: %s", strerror(errno));
	if (syscall(SYS_capget, &h, d) < 0 || d[0].effective || d[1].effective || d[0].permitted || d[1].permitted)
		dshr_fail("capability self-test: capabilities remain after dropping them");
}

// dshr_cache_env: without a mount view, each toolchain cache a tool finds
// through a variable gets it set to the cache's upper layer (writable by a
// Landlock rule the supervisor added), unless the command has it already;
// dshr_caches then says 'e' for it ('0' for the others).
void dshr_cache_env(void) {
	int n = dshr_opt(KEY_NCACHES);
	if (n <= 0 || n >= (int)sizeof dshr_caches) return;
	memset(dshr_caches, '0', (size_t)n);
	dshr_caches[n] = 0;
	static char buf[8192];
	if (snprintf(buf, sizeof buf, "%s", dshr_opt_str(KEY_CACHEENV)) >= (int)sizeof buf) return;
	for (char *save = NULL, *e = strtok_r(buf, "\n", &save); e; e = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(e, ':'), *eq = colon ? strchr(colon, '=') : NULL;
		if (!colon || !eq) continue;
		int i = atoi(e);
		*eq = 0;
		if (i < 0 || i >= n || getenv(colon + 1)) continue;
		if (setenv(colon + 1, eq + 1, 0) == 0) dshr_caches[i] = 'e';
	}
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


// enter_user_namespace moves the runner into a new user namespace, mapping
// the caller's uid and gid to themselves. A host that refuses user
// namespaces leaves the runner where it was (dshr_ns_error says why); a host
// that lets us create one but not map our ids leaves us unusable, and the
// runner fails with "userns-map" so the supervisor can start a fresh runner
// without namespaces.
static void enter_user_namespace(void) {
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER) < 0) {
		int e = errno;
		const char *why = e == ENOSPC ? "user.max_user_namespaces is 0 or exhausted"
		                  : (e == EPERM || e == EACCES) ? "blocked by the host (AppArmor userns restriction, a container seccomp profile, or a sysctl)"
		                  : e == EINVAL || e == ENOSYS ? "not supported by this kernel" : strerror(e);
		snprintf(dshr_ns_error, sizeof dshr_ns_error, "user namespaces unavailable: %s", why);
		return;
	}
	char map[64];
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0) {
		if (dshr_out_of_resources(errno)) dshr_fail_sys("uid_map", errno);
		dshr_fail("userns-map: uid_map: %s", strerror(errno));
	}
	if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) {
		if (dshr_out_of_resources(errno)) dshr_fail_sys("setgroups", errno);
		dshr_fail("userns-map: setgroups: %s", strerror(errno));
	}
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/gid_map", map) < 0) {
		if (dshr_out_of_resources(errno)) dshr_fail_sys("gid_map", errno);
		dshr_fail("userns-map: gid_map: %s", strerror(errno));
	}
	dshr_ns_user = 1;
}

// The namespaces made in the user namespace: the session's (a session
// runner makes them once for all its commands) and each command's own.
static const struct {
	int flag, session;
	int *done;
	const char *name;
} more_namespaces[] = {{CLONE_NEWNS, 0, &dshr_ns_mount, "mount"}, {CLONE_NEWIPC, 0, &dshr_ns_ipc, "ipc"}, {CLONE_NEWUTS, 1, &dshr_ns_uts, "uts"},
                       {CLONE_NEWPID, 0, &dshr_ns_pid, "pid"},    {CLONE_NEWNET, 1, &dshr_ns_net, "net"}};

// enter_more unshares the namespaces of more_namespaces whose session is
// session (net only with want_net), recording those refused.
static void enter_more(int session, int want_net) {
	for (size_t i = 0; i < sizeof more_namespaces / sizeof more_namespaces[0]; i++) {
		if (more_namespaces[i].session != session || (more_namespaces[i].flag == CLONE_NEWNET && !want_net)) continue;
		if (unshare(more_namespaces[i].flag) == 0)
			*more_namespaces[i].done = 1;
		else
			dshr_add_reason("no %s namespace: %s", more_namespaces[i].name, strerror(errno));
	}
}

// dshr_enter_session_namespaces is a session runner's step: the user
// namespace, and in it the UTS and (with want_net) net namespaces its
// commands share.
void dshr_enter_session_namespaces(int want_net) {
	enter_user_namespace();
	if (dshr_ns_user) enter_more(1, want_net);
}

// enter_namespaces moves the runner into new user, mount, ipc, uts, pid (for
// its children) and, without network, net namespaces; a runner forked by a
// session runner is in the session's user, UTS and net namespaces already,
// and makes the others.
static void enter_namespaces(int want_net) {
	if (!dshr_session) {
		dshr_enter_session_namespaces(want_net);
		if (!dshr_ns_user) return;
	}
	enter_more(0, want_net);
}

// dshr_setup_namespaces is step 0. With a pid namespace it forks the namespace's
// init and returns in it; the runner itself stays outside as a relay.
void dshr_setup_namespaces(int want_net) {
	enter_namespaces(want_net);
	if (!dshr_ns_pid) return;
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	// The supervisor learns the init's pid (as seen from outside) before
	// the init says anything: the init waits on gate.
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0) dshr_fail_sys("pipe", errno);
	pid_t init = fork();
	if (init < 0) dshr_fail_sys("fork", errno);
	if (init > 0) {
		char im[64];
		snprintf(im, sizeof im, "{\"kind\":\"init\",\"pid\":%d}", (int)init);
		dshr_send_msg(im);
		close(gate[1]);
		close(gate[0]);
		dshr_close_extra();
		dshr_relay(init, 0);
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
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) dshr_fail("set parent-death signal: %s", strerror(errno));
}
