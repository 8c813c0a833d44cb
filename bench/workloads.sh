#!/usr/bin/env bash
# The performance workloads, in one run: the median wall time of
#   `bash -c true`                    spawn cost
#   `tar x` of 5,000 small files      5,000 file creations (50 directories, 100-2000 bytes each)
#   `git status` in 5,000 files       a repository of 5,000 committed files
#   `make -j2` of 17 small C files    gcc -O2 of 17 files and a link
#   `bash -c true` in a git repository of 1k, 20k and 200k files (10 files a directory):
#                                     what a command costs as the workspace grows
#   `git status` in the 200k-file repository
# each bare (`bash -c CMD`), under dsh-sandbox-run --mode workspace-write (dsh), under
# bubblewrap with its usual profile (bwrap) and under landrun (a Landlock-only launcher in Go;
# left out, saying why, when none is found), measured interleaved: every round runs each
# variant once, in an order rotating from round to round, so load drift hits all of them
# alike. Then a table of medians and their ratios to bwrap, and the cost of one notified
# write-like call: a C program times N openat(O_WRONLY|O_CREAT) calls under
# --mode danger-full-access (no supervisor) and --mode workspace-write (each call a seccomp
# user notification answered by the supervisor), against the floor: the same program bare
# and under a C supervisor that only continues each call; the four 3 times, interleaved. Last, a
# transaction's cost: the tar workload under dsh with and without --transaction, and the
# commit of the 5,000 files it made against `cp -a` of them.
#
# Each workload has a workspace of its own (WS below), a directory of a temporary root under
# /var/tmp (not /tmp: bwrap's profile mounts a tmpfs there), removed on exit:
#   bare   bash -c CMD                                              (working directory WS)
#   dsh    DSH_BIN --mode workspace-write --workspace WS -- bash -c CMD   (working directory WS)
#   bwrap  bwrap --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp
#                --bind WS WS --chdir WS -- bash -c CMD
#   landrun  LANDRUN --best-effort --rox / --rw WS --rw /tmp --rw /dev --env PATH --env HOME
#                -- bash -c CMD                                 (working directory WS)
#   floor  bwrap's line, its command floor -w WS bash -c CMD: the least a sandbox that checks
#                writes adds to bwrap's confinement, in C (below): Landlock (read and execute
#                under /, everything under WS, /tmp and /dev) and every write-like call a seccomp
#                user notification answered CONTINUE without a look. floor/bwrap is the lowest
#                dsh/bwrap any such design can reach on this machine.
# What a run needs is made before the timing, and what it leaves removed after it: tar
# extracts into a fresh empty WS/out; make starts from `make clean`.
#
# Usage: bench/workloads.sh          (from anywhere; uses bin/dsh-sandbox-run of this repository)
# Environment: ROUNDS (20: tar, git, make, the scale rows), SPAWN_ROUNDS (5 x ROUNDS: bash -c true),
#              NOTIFY_CALLS (20000), DSH_BIN (bin/dsh-sandbox-run),
#              SCALE ("1000 20000 200000": the file counts of the scale rows, each a multiple
#              of 10; the largest also gets the `git status` row),
#              LANDRUN (landrun on PATH: no Debian package exists; build it from
#              https://github.com/zouuup/landrun with `go build ./cmd/landrun`),
#              BENCH_OUT (bench/results: the raw times are kept there as CSV;
#              $TMPDIR or /tmp when that is not writable).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${DSH_BIN:-$repo/bin/dsh-sandbox-run}"
# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
out_dir="${BENCH_OUT:-$repo/bench/results}"

die() { echo "workloads.sh: $*" >&2; exit 1; }
count() { # NAME DEFAULT: $NAME, or DEFAULT when unset; a positive integer or die
  local v="${!1:-$2}"
  case "$v" in '' | *[!0-9]* | 0*) die "$1 must be a positive integer (got '$v')" ;; esac
  echo "$v"
}
rounds="$(count ROUNDS 20)"
scale="${SCALE-1000 20000 200000}"
for n in $scale; do
  case "$n" in *[!0-9]* | 0* | *[1-9]) die "SCALE must list multiples of 10 (got '$n')" ;; esac
done
landrun="${LANDRUN:-$(command -v landrun || true)}"
if [ -n "$landrun" ] && ! [ -x "$landrun" ]; then
  die "LANDRUN=$landrun is not an executable"
fi
spawn_rounds="$(count SPAWN_ROUNDS $((5 * rounds)))"
notify_calls="$(count NOTIFY_CALLS 20000)"

missing=()
for tool in bwrap bash python3 gcc make git tar; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  die "missing tool(s): ${missing[*]} (make bench-deps installs bubblewrap; gcc and make: apt-get install build-essential; python3 drives the runs and the statistics)"
fi
[ -x "$bin" ] || die "$bin not found or not executable (run make build first)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

if ! mkdir -p "$out_dir" 2>/dev/null || [ ! -w "$out_dir" ]; then
  out_dir="${TMPDIR:-/tmp}"
fi
csv="$out_dir/workloads-$(date +%Y%m%d-%H%M%S).csv"

root="$(mktemp -d /var/tmp/dsh-bench-workloads.XXXXXX)"
root="$(cd "$root" && pwd -P)"
trap 'rm -rf "$root"' EXIT
chmod 755 "$root"

echo "== host"
echo "kernel: $(uname -r); cpus: $(nproc); user: $(id -un) (uid $(id -u))"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(bwrap --version); $(gcc --version | head -n1); $(git --version); $(tar --version | head -n1)"
echo "(the figures move with any other load on the machine: compare ratios, from one run)"
echo
print_probe "$bin"

# --- fixtures (made once, untimed) --------------------------------------------------------
echo "== fixtures in $root"
mkdir -p "$root/fixture" "$root/ws"
# The 5,000 files: 50 directories of 100, 100-2000 bytes of text each (a fixed seed: every
# run of the script makes the same tree). Then the 17 C files and their Makefile.
python3 - "$root/fixture/tree" "$root/ws/make" <<'EOF'
import os, random, sys

tree, make_dir = sys.argv[1], sys.argv[2]
rng = random.Random(15)
alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 ;=(){}\n"
table = bytes(alphabet[i % len(alphabet)] for i in range(256))
for i in range(5000):
    d = os.path.join(tree, f"d{i % 50:02d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:04d}.txt"), "wb") as f:
        f.write(rng.randbytes(rng.randint(100, 2000)).translate(table))

os.makedirs(make_dir)
for n in range(1, 17):
    with open(os.path.join(make_dir, f"f{n:02d}.c"), "w") as f:
        f.write(f"""#include <stdio.h>
#include <string.h>

static const int table{n}[] = {{ {", ".join(str((n * k * 7919) % 1000) for k in range(32))} }};

int f{n:02d}(int x)
{{
\tchar buf[64];
\tint s = 0;
\tfor (int i = 0; i < x; i++)
\t\ts += table{n}[i % 32] * (i ^ {n});
\tsnprintf(buf, sizeof buf, "%d", s);
\treturn (int)strlen(buf) + s % {n + 7};
}}
""")
with open(os.path.join(make_dir, "main.c"), "w") as f:
    f.write("#include <stdio.h>\n\n")
    f.write("".join(f"int f{n:02d}(int);\n" for n in range(1, 17)))
    f.write("\nint main(void)\n{\n\tint s = 0;\n\n")
    f.write("".join(f"\ts += f{n:02d}({n * 100});\n" for n in range(1, 17)))
    f.write('\tprintf("%d\\n", s);\n\treturn 0;\n}\n')
with open(os.path.join(make_dir, "Makefile"), "w") as f:
    f.write("CC = gcc\nCFLAGS = -O2 -Wall\nOBJS = main.o "
            + " ".join(f"f{n:02d}.o" for n in range(1, 17)) + "\n\n"
            "prog: $(OBJS)\n\t$(CC) $(CFLAGS) -o $@ $(OBJS)\n\n"
            "%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n"
            "clean:\n\trm -f $(OBJS) prog\n\n.PHONY: clean\n")
EOF
archive="$root/fixture/files.tar"
tar -C "$root/fixture/tree" -cf "$archive" .
mkdir "$root/ws/spawn" "$root/ws/tar" "$root/ws/notify" "$root/ws/notify/d"
cp -R "$root/fixture/tree" "$root/ws/git"
(
  cd "$root/ws/git"
  git -c init.defaultBranch=main init -q .
  git add -A
  git -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false commit -q -m fixture
  git status --porcelain >/dev/null # refreshes the index once, so that no run writes it
) || die "making the git repository in $root/ws/git failed"
(cd "$root/ws/make" && make -s -j2 >/dev/null && make -s clean) || die "building the C fixture in $root/ws/make failed"
# The scale repositories: N files of one line, 10 to a directory, 100 directories to a parent
# (200k files: 20,000 directories under 200), committed.
for n in $scale; do
  python3 - "$root/ws/scale-$n" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 1000:03d}", f"s{i // 10 % 100:02d}")
    if i % 10 == 0:
        os.makedirs(d)
    with open(os.path.join(d, f"f{i}.txt"), "w") as f:
        f.write(f"line {i}\n")
PY
  (
    cd "$root/ws/scale-$n"
    git -c init.defaultBranch=main init -q .
    git add -A
    git -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false -c gc.auto=0 commit -q -m fixture
    git config gc.auto 0 # no automatic gc in the background of a timed run
    git status --porcelain >/dev/null
  ) || die "making the git repository of $n files failed"
done

# The notified write-like call: N openat(O_WRONLY|O_CREAT) + close of d/f, each openat timed.
cat >"$root/fixture/notify.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	if (n < 1) {
		fprintf(stderr, "notify: bad call count %s\n", argv[1]);
		return 2;
	}
	long *ns = malloc(n * sizeof *ns);
	if (!ns) {
		perror("notify: malloc");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int fd = openat(AT_FDCWD, "d/f", O_WRONLY | O_CREAT, 0644);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (fd < 0) {
			perror("notify: openat d/f");
			return 1;
		}
		close(fd);
		ns[i] = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
	}
	qsort(ns, n, sizeof *ns, cmp);
	double median = n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2.0;
	double p90 = ns[(n * 9 + 9) / 10 - 1]; /* nearest rank */
	printf("%.3f %.3f\n", median / 1000.0, p90 / 1000.0);
	return 0;
}
EOF
gcc -O2 -Wall -o "$root/fixture/notify" "$root/fixture/notify.c" || die "compiling the openat timer failed"

# The floor: the least a supervisor can do. `floor [-w WS] PROGRAM ARGS...` runs PROGRAM
# with every write-like call a seccomp user notification, answered by a C loop (poll, receive,
# CONTINUE) that looks at nothing; it sets the synchronous wake-up where the kernel has it
# (Linux 6.6), as dsh's supervisor does. With -w (the floor variant, inside bwrap's profile)
# Landlock too: the least a sandbox that checks writes adds to bubblewrap's confinement.
cat >"$root/fixture/floor.c" <<'EOF'
/* floor [-w WS] PROGRAM [ARGS...]: every write-like call of PROGRAM (an open
 * for writing, creating or truncating; mkdir, mknod, unlink, rename, link,
 * symlink, chmod) a seccomp user notification, answered CONTINUE by a C loop
 * that looks at nothing; with -w, Landlock too (read and execute under /,
 * everything under WS, /tmp and /dev). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

static int xfer(int sock, int fd) /* fd >= 0: send it; else receive one */
{
	char buf[CMSG_SPACE(sizeof(int))] = {0};
	char b = 0;
	struct iovec io = {.iov_base = &b, .iov_len = 1};
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof buf};
	if (fd >= 0) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof fd);
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
		return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
	}
	if (recvmsg(sock, &m, 0) != 1 || !CMSG_FIRSTHDR(&m))
		return -1;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
	return fd;
}

static int landlock(const char *ws)
{
	__u64 all = (1ULL << 16) - 1; /* ABI 5's rights */
	struct landlock_ruleset_attr ra = {.handled_access_fs = all};
	int rs = syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
	if (rs < 0)
		return -1;
	struct landlock_path_beneath_attr pb = {
		.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
		.parent_fd = open("/", O_PATH | O_CLOEXEC)};
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -1;
	const char *rw[] = {ws, "/tmp", "/dev", NULL};
	for (int i = 0; rw[i]; i++) {
		pb.allowed_access = all;
		pb.parent_fd = open(rw[i], O_PATH | O_CLOEXEC);
		if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			return -1;
	}
	return syscall(SYS_landlock_restrict_self, rs, 0);
}

int main(int argc, char **argv)
{
	const char *ws = NULL;
	if (argc > 2 && strcmp(argv[1], "-w") == 0) {
		ws = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: floor [-w WS] PROGRAM [ARGS...]\n");
		return 2;
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0) {
		perror("floor: socketpair");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* By number: open and openat by their flags (a write, a
		 * creation or a truncation), the rest always. */
		static const int always[] = {SYS_creat, SYS_mkdirat, SYS_mkdir, SYS_mknodat, SYS_unlinkat,
			SYS_unlink, SYS_rmdir, SYS_renameat2, SYS_renameat, SYS_rename, SYS_linkat, SYS_link,
			SYS_symlinkat, SYS_symlink, SYS_fchmodat, SYS_chmod};
		enum { N = sizeof always / sizeof always[0] };
		struct sock_filter f[N + 10];
		int i = 0;
		f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, N + 2, 0);
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, N + 3, 0);
		for (int j = 0; j < N; j++)
			f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, always[j], N + 5 - j, 0);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]));
		f[i++] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 1);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC, 1, 0);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
		struct sock_fprog prog = {.len = i, .filter = f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || (ws && landlock(ws) < 0)) {
			perror("floor: landlock");
			_exit(1);
		}
		int lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		if (lfd < 0 || xfer(sp[0], lfd) < 0) {
			perror("floor: seccomp");
			_exit(1);
		}
		close(lfd);
		close(sp[0]);
		close(sp[1]);
		execvp(argv[1], argv + 1);
		perror("floor: exec");
		_exit(127);
	}
	close(sp[0]);
	int lfd = xfer(sp[1], -1);
	if (pid < 0 || lfd < 0) {
		perror("floor: the listener");
		return 1;
	}
	ioctl(lfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	for (;;) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!(p.revents & POLLIN))
			break;
		memset(&req, 0, sizeof req);
		if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			break;
		}
		memset(&resp, 0, sizeof resp);
		resp.id = req.id;
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
EOF
gcc -O2 -Wall -o "$root/fixture/floor" "$root/fixture/floor.c" || die "compiling the floor failed"
echo "5,000 files in 50 directories ($(du -sk "$archive" | cut -f1) KiB tar), a git repository of them, 17 C files, the openat timer and its C supervisor${scale:+, git repositories of $scale files}"
if [ -n "$landrun" ]; then
  echo "landrun: $landrun ($("$landrun" --version 2>&1 | head -n1))"
else
  echo "landrun: not found (set LANDRUN; build it from https://github.com/zouuup/landrun): its column is left out"
fi
echo

# --- measurement -------------------------------------------------------------------------
python3 - "$bin" "$(command -v bash)" "$root" "$archive" "$rounds" "$spawn_rounds" "$notify_calls" "$csv" "$scale" "$landrun" <<'EOF'
import csv, os, shlex, shutil, statistics, subprocess, sys, time

bin_, bash, root, archive, rounds, spawn_rounds, notify_calls, csv_path, scale, landrun = sys.argv[1:]
scale = [int(n) for n in scale.split()]
rounds, spawn_rounds = int(rounds), int(spawn_rounds)
ws_root = os.path.join(root, "ws")


def die(msg):
    print(f"workloads.sh: {msg}", file=sys.stderr)
    sys.exit(1)


def argv_of(variant, ws, cmd):
    if variant == "bare":
        return [bash, "-c", cmd]
    if variant == "dsh":
        return [bin_, "--mode", "workspace-write", "--workspace", ws, "--", bash, "-c", cmd]
    if variant == "landrun":
        return [landrun, "--best-effort", "--rox", "/", "--rw", ws, "--rw", "/tmp", "--rw", "/dev",
                "--env", "PATH", "--env", "HOME", "--", bash, "-c", cmd]
    box = [os.path.join(root, "fixture", "floor"), "-w", ws] if variant == "floor" else []
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent",
            "--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws, "--"] + box + [bash, "-c", cmd]


def tar_prepare(ws):
    os.mkdir(os.path.join(ws, "out"))


def tar_cleanup(ws):
    shutil.rmtree(os.path.join(ws, "out"))


def make_prepare(ws):
    subprocess.run(["make", "-s", "clean"], cwd=ws, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


nothing = lambda ws: None
# (label, workspace, command, rounds, prepare before each run, cleanup after it): both untimed.
workloads = [
    ("`bash -c true`", "spawn", "true", spawn_rounds, nothing, nothing),
    ("`tar x` 5,000 files", "tar", f"tar -xf {shlex.quote(archive)} -C out", rounds, tar_prepare, tar_cleanup),
    ("`git status` 5,000 files", "git", "git status --porcelain >/dev/null", rounds, nothing, nothing),
    ("`make -j2` 17 C files", "make", "make -j2", rounds, make_prepare, nothing),
]
def files(n):
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)
for n in scale:
    workloads.append((f"`bash -c true`, {files(n)}-file repository", f"scale-{n}", "true", rounds, nothing, nothing))
if scale:
    n = max(scale)
    workloads.append((f"`git status` {files(n)} files", f"scale-{n}", "git status --porcelain >/dev/null",
                      rounds, nothing, nothing))
variants = ["bare", "dsh", "bwrap", "floor"] + (["landrun"] if landrun else [])


def describe(variant, ws, cmd):
    return " ".join(shlex.quote(a) for a in argv_of(variant, ws, cmd))


# One untimed run of each (also a warm-up), its stderr kept: a broken setup is reported
# plainly, with the command's own words.
for label, sub, cmd, _, prepare, cleanup in workloads:
    ws = os.path.join(ws_root, sub)
    for v in list(variants):
        if v not in variants:
            continue  # left out by an earlier variant's preflight
        prepare(ws)
        p = subprocess.run(argv_of(v, ws, cmd), cwd=ws, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cleanup(ws)
        if p.returncode == 0:
            continue
        err = p.stderr.decode(errors="replace").strip()
        msg = f"preflight of {label} ({v}) exited {p.returncode}: {describe(v, ws, cmd)}"
        if err:
            msg += "\n" + "\n".join("  " + line for line in err.splitlines()[-15:])
        if v in ("bwrap", "floor") and sub == "spawn":
            print(msg + "\nworkloads.sh: bubblewrap cannot run here (e.g. user namespaces "
                  "restricted): the bwrap and floor columns and the ratios are left out", file=sys.stderr)
            variants = [x for x in variants if x not in ("bwrap", "floor")]
            continue
        if v == "landrun" and sub == "spawn":
            print(msg + "\nworkloads.sh: landrun cannot run here: its column is left out", file=sys.stderr)
            variants.remove("landrun")
            continue
        die(msg)

times = {}  # (label, variant) -> [ms]
rows = []   # raw CSV rows
for label, sub, cmd, n, prepare, cleanup in workloads:
    ws = os.path.join(ws_root, sub)
    key = sub if cmd == "true" or sub in ("tar", "git", "make") else f"{sub}-{cmd.split()[0]}"
    print(f"== {label}: {n} rounds", flush=True)
    for r in range(n):
        k = r % len(variants)
        for slot, v in enumerate(variants[k:] + variants[:k]):
            prepare(ws)
            argv = argv_of(v, ws, cmd)
            t0 = time.perf_counter_ns()
            p = subprocess.run(argv, cwd=ws, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t1 = time.perf_counter_ns()
            if p.returncode != 0:
                die(f"{label} ({v}), round {r + 1}, exited {p.returncode}: {describe(v, ws, cmd)}")
            cleanup(ws)
            ms = (t1 - t0) / 1e6
            times.setdefault((label, v), []).append(ms)
            rows.append([key, v, r + 1, slot, f"{ms:.4f}", "ms"])

# The notified write-like call: danger-full-access (no supervisor) against workspace-write
# (every openat with O_CREAT a seccomp user notification), and the floor: the timer bare
# against the timer under the C supervisor that only continues. The four run 3 times, in an
# order rotating from round to round.
nws = os.path.join(ws_root, "notify")
timer = os.path.join(root, "fixture", "notify")
floor = os.path.join(root, "fixture", "floor")
notify = {"workspace-write": [], "danger-full-access": [], "bare": [], "floor": []}
print(f"== notified write-like call: 3 x 4 runs of {notify_calls} openat calls", flush=True)

for r in range(3):
    modes = ["danger-full-access", "workspace-write", "bare", "floor"]
    for slot, mode in enumerate(modes[r:] + modes[:r]):
        if mode == "bare":
            argv = [timer, notify_calls]
        elif mode == "floor":
            argv = [floor, timer, notify_calls]
        else:
            argv = [bin_, "--mode", mode, "--workspace", nws, "--", timer, notify_calls]
        p = subprocess.run(argv, cwd=nws, stdin=subprocess.DEVNULL, capture_output=True)
        if p.returncode != 0:
            die(f"openat timer ({mode}), round {r + 1}, exited {p.returncode}: "
                + " ".join(shlex.quote(a) for a in argv) + "\n  "
                + p.stderr.decode(errors="replace").strip())
        med, p90 = (float(x) for x in p.stdout.split())
        notify[mode].append((med, p90))
        rows.append(["notify", mode, r + 1, slot, f"{med:.3f}", "us-median"])
        rows.append(["notify", mode, r + 1, slot, f"{p90:.3f}", "us-p90"])

# Transactions: the tar workload under dsh with --transaction against without,
# interleaved; after each transactional run, the commit of what it made (5,000 files moved
# into the workspace) against `cp -a` of the same tree (copied first, from the upper layer).
tws = os.path.join(ws_root, "tar")
tar_cmd = f"tar -xf {shlex.quote(archive)} -C out"
txdir, cpdst = os.path.join(root, "tx"), os.path.join(root, "cp-dst")
tx = {"direct": [], "transaction": [], "commit": [], "cp -a": []}
print(f"== transactions: {rounds} x 2 runs of `tar x`, then commit against cp -a", flush=True)


def timed(argv, what):
    t0 = time.perf_counter_ns()
    p = subprocess.run(argv, cwd=tws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t1 = time.perf_counter_ns()
    if p.returncode != 0:
        die(f"{what} exited {p.returncode}: " + " ".join(shlex.quote(a) for a in argv) + "\n  "
            + p.stderr.decode(errors="replace").strip())
    return (t1 - t0) / 1e6


for r in range(rounds):
    for slot, v in enumerate(["direct", "transaction"] if r % 2 == 0 else ["transaction", "direct"]):
        tar_prepare(tws)
        flags = ["--transaction", txdir] if v == "transaction" else []
        ms = timed([bin_, "--mode", "workspace-write", "--workspace", tws] + flags + ["--", bash, "-c", tar_cmd], f"tar x ({v})")
        tx[v].append(ms)
        rows.append(["tar-transaction", v, r + 1, slot, f"{ms:.4f}", "ms"])
        if v == "transaction":
            ms = timed(["cp", "-a", os.path.join(txdir, "upper", "out"), cpdst], "cp -a")
            tx["cp -a"].append(ms)
            rows.append(["commit-5000", "cp -a", r + 1, 0, f"{ms:.4f}", "ms"])
            shutil.rmtree(cpdst)
            ms = timed([bin_, "commit", txdir], "commit")
            tx["commit"].append(ms)
            rows.append(["commit-5000", "commit", r + 1, 1, f"{ms:.4f}", "ms"])
            shutil.rmtree(txdir)
        tar_cleanup(tws)

with open(csv_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["workload", "variant", "round", "slot", "value", "unit"])
    w.writerows(rows)

med = lambda xs: statistics.median(xs)
print()
print(f"== medians (interleaved rounds; raw times: {csv_path})")
print("| workload | bare ms | dsh ms | bwrap ms | floor ms | landrun ms | bare/bwrap | dsh/bwrap | floor/bwrap | landrun/bwrap |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for label, sub, *_ in workloads:
    m = {v: med(times[(label, v)]) for v in variants}
    bw = m.get("bwrap")
    cell = lambda v: f"{m[v]:.2f}" if v in m else "-"
    ratio = lambda v: f"{m[v] / bw:.2f}" if bw and v in m else "-"
    print(f"| {label} | {cell('bare')} | {cell('dsh')} | {cell('bwrap')} | {cell('floor')} | {cell('landrun')} "
          f"| {ratio('bare')} | {ratio('dsh')} | {ratio('floor')} | {ratio('landrun')} |")
if len(scale) > 1:
    row = lambda n: f"`bash -c true`, {files(n)}-file repository"
    growth = lambda v: med(times[(row(max(scale)), v)]) / med(times[(row(min(scale)), v)])
    print("`bash -c true` in the " + files(max(scale)) + "-file repository against the " + files(min(scale))
          + "-file one: " + ", ".join(f"{v} {growth(v):.2f}x" for v in variants))
print(f"(rounds: `bash -c true` {spawn_rounds}, the others {rounds}; "
      f"load average now: {' '.join(open('/proc/loadavg').read().split()[:3])})")
print()

ww_med = med([x[0] for x in notify["workspace-write"]])
ww_p90 = med([x[1] for x in notify["workspace-write"]])
df_med = med([x[0] for x in notify["danger-full-access"]])
df_p90 = med([x[1] for x in notify["danger-full-access"]])
print(f"notified write-like call: median {ww_med - df_med:.1f} µs added (workspace-write {ww_med:.1f} µs, "
      f"danger-full-access {df_med:.1f} µs), p90 {ww_p90 - df_p90:.1f} µs added (workspace-write "
      f"{ww_p90:.1f} µs, danger-full-access {df_p90:.1f} µs); median of 3 interleaved runs "
      f"of {notify_calls} openat(O_WRONLY|O_CREAT) each")
fl_med, fl_p90 = med([x[0] for x in notify["floor"]]), med([x[1] for x in notify["floor"]])
bare_med, bare_p90 = med([x[0] for x in notify["bare"]]), med([x[1] for x in notify["bare"]])
print(f"the floor, a C supervisor that only continues: median {fl_med - bare_med:.1f} µs added "
      f"(under it {fl_med:.1f} µs, bare {bare_med:.1f} µs), p90 {fl_p90 - bare_p90:.1f} µs added; "
      f"dsh's added cost is {(ww_med - df_med) / max(fl_med - bare_med, 0.001):.2f}x the floor's")
m = {k: med(v) for k, v in tx.items()}
print(f"transaction: `tar x` 5,000 files {m['transaction']:.1f} ms in a transaction, {m['direct']:.1f} ms direct "
      f"({m['transaction'] / m['direct']:.2f}x); commit of the 5,000 files {m['commit']:.1f} ms, "
      f"`cp -a` of them {m['cp -a']:.1f} ms ({m['commit'] / m['cp -a']:.2f}x); medians of {rounds} interleaved rounds")
EOF
