// The runner's internal header: what its files share. The runner is C, run
// from an ELF constructor before the Go runtime starts (runner_cgo_linux.go);
// cgo compiles each of these files, and the _linux suffix keeps them (and
// this header) out of every other GOOS's build.
//
//   runner_main_linux.c    the constructor, runner_main, the spec and its options
//   runner_msg_linux.c     the control messages: json_str, send, recv, fail, reasons
//   runner_ns_linux.c      namespaces, the mount view, capabilities, cache variables
//   runner_tree_linux.c    the relay, keeper and init: supervise, kill_tree, seal_process
//   runner_net_linux.c     the sandbox's loopback, egress listeners, stub resolver sockets
//   runner_filter_linux.c  the seccomp program and listener, the Landlock signal scope
//   runner_session_linux.c the session runner: namespaces kept for the next commands
//
// Every symbol shared between the files is named dshr_ (static otherwise),
// so that none collides with another C library linked into the same binary;
// only what Go calls (dsh_kill_tree_signal) has a name of its own.

#ifndef DSH_RUNNER_LINUX_H
#define DSH_RUNNER_LINUX_H

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
#define MAX_CGJOIN 8   // cgroup files with the spec: one per v1 hierarchy joined
#define MAX_RECV_FDS 8 // descriptors one control message may carry (dshr_recv_fds)

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

// ---------------------------------------------------------------------------
// The protocol's tokens: every word the runner matches in its invocation and
// in the spec, in one list. The Go side must write the same:
//   RUNNER_*            Arg0 and EnvVar, sandbox/internal/runner/protocol.go
//   SPEC_MAGIC, SPEC_OPS  SpecTokens, sandbox/internal/runner/protocol.go
//   KEY_*               the options of preparation.spec, sandbox/prepare_linux.go
//   OP_*, MODE_*        the mount plan, mountplan.Plan,
//                       sandbox/internal/mountplan/mountplan_linux.go
// The spec is NUL-separated tokens: SPEC_MAGIC, KEY value pairs, SPEC_OPS,
// then the mount plan's steps. It comes in two parts: the first, sent when
// the runner is spawned, has the options the namespaces need (KEY_CONFINE,
// KEY_USERNS, KEY_NETNS, KEY_EXTRA, KEY_CGJOIN); the second, once the
// supervisor prepared the policy, is the whole spec. An option the spec lacks reads as 0 (dshr_opt)
// or "" (dshr_opt_str).

// The invocation: argv[0] and an environment variable set to "1" (a
// runner) or "session" (a session runner, runner_session_linux.c).
#define RUNNER_ARG0 "dsh-sandbox-runner"
#define RUNNER_ENV "_DSH_SANDBOX_RUNNER"
#define RUNNER_ENV_SESSION "session"

#define SPEC_MAGIC "dsh2" // the first token (of both parts)
#define SPEC_OPS "ops"    // ends the options; the mount plan follows

// Options (KEY value).
#define KEY_CONFINE "confine"       // 1: confine (a seccomp program follows the spec)
#define KEY_USERNS "userns"         // 1: make the namespaces (dshr_setup_namespaces)
#define KEY_NETNS "netns"           // 1: with a net namespace of the command's own
#define KEY_EXTRA "extra"           // how many extra files (the runner's fds 4..)
#define KEY_CGJOIN "cgjoin"         // how many cgroup tasks files came with the first part (join_cgroup)
#define KEY_LANDLOCK "landlock"     // 1: a Landlock ruleset fd comes with the program
#define KEY_LLSELFTEST "llselftest" // 1: check that Landlock denies a write in /proc
#define KEY_NOTIFY "notify"         // 1: seccomp user notification (the listener)
#define KEY_SCOPESIG "scopesig"     // 1: nest the command in a Landlock signal scope
#define KEY_NEEDVIEW "needview"     // not "": fail with it when there is no mount view
#define KEY_BPF2 "bpf2"             // bytes of the second program (no mount view), 0: none
#define KEY_WHY "why"               // why there is no Landlock (for a fail message)
#define KEY_PATH "path"             // the command's executable ("": execvp of argv[1])
#define KEY_NPROC "nproc"           // RLIMIT_NPROC in the runner's user namespace, 0: none
#define KEY_EGRESS "egress"         // egress listener addresses, comma-separated
#define KEY_DNS "dns"               // stub resolver addresses, comma-separated
#define KEY_NCACHES "ncaches"       // how many toolchain cache overlays
#define KEY_CACHEENV "cacheenv"     // I:NAME=VALUE lines (dshr_cache_env)

// Mount plan steps (dshr_apply_mounts).
#define OP_MOUNT "m"          // m SRC TGT FSTYPE FLAGS MODE
#define OP_MOUNT_DATA "md"    // md SRC TGT FSTYPE FLAGS MODE DATA
#define OP_REMOUNT_RO "r"     // r TGT FLAGS: remount read-only
#define OP_LANDLOCK_RULE "l"  // l PATH ACCESS: a Landlock rule
#define OP_SAME "same"        // same FD PATH: FD is PATH in this mount namespace
#define OP_CHECK_RO "ro"      // ro PATH: self-test, PATH must be read-only
// The MODE of m and md. With any other (Go writes "hard") a failed mount ends
// the plan: no mount view.
#define MODE_PROC "proc"   // a fresh /proc: only with a pid namespace, a failure is a reason
#define MODE_CACHE "cache" // a toolchain cache's overlay or bind: a failure leaves the cache read-only
#define MODE_CACHE_FLAGS "cacheflags" // the flags of the cache bind just made: a failure undoes it
#define MODE_SKIP "skip"   // a path this uid cannot reach (EACCES, ENOENT, ENOTDIR) is skipped

// ---------------------------------------------------------------------------
// runner_main_linux.c: the spec and its options.

extern char *dshr_tok[MAX_TOKENS];
extern int dshr_ntok;
int dshr_opt(const char *key);
const char *dshr_opt_str(const char *key);
void dshr_close_extra(void);

// runner_msg_linux.c: the control messages.

extern char dshr_reasons[4096];
void dshr_json_str(char *out, size_t cap, const char *s);
int dshr_send_msg(const char *msg);
ssize_t dshr_recv_msg(char *buf, size_t cap);
ssize_t dshr_recv_fds(char *buf, size_t cap, int *fds, int max, int *nfds, int *trunc);
__attribute__((noreturn)) void dshr_fail(const char *fmt, ...);
__attribute__((noreturn)) void dshr_fail_sys(const char *op, int e);
int dshr_out_of_resources(int e);
void dshr_add_reason(const char *fmt, ...);

// runner_ns_linux.c: namespaces, the mount view, capabilities.

extern int dshr_ns_user, dshr_ns_mount, dshr_ns_pid, dshr_ns_net, dshr_ns_ipc, dshr_ns_uts;
extern char dshr_ns_error[512];
extern char dshr_caches[129];
int dshr_apply_mounts(int from, int *fresh_proc, int ruleset);
void dshr_drop_capabilities(void);
void dshr_cache_env(void);
void dshr_setup_namespaces(int want_net);
void dshr_enter_session_namespaces(int want_net);

// runner_session_linux.c: the session runner.

extern int dshr_session, dshr_session_netns;
__attribute__((noreturn)) void dshr_session_main(char **argv, void (*run)(char **));

// runner_tree_linux.c: the relay, keeper and init, and the tree's kill.

// keeper_death_signal is the parent-death signal of an inner keeper: its
// relay is gone, so it kills the tree.
#define keeper_death_signal (SIGRTMIN + 3)

// kill_tree_signal asks a pid namespace's init to kill its namespace
// (Cmd.Kill sends it, then SIGKILL if the init has not exited in time). The
// init does it with kill(-1) — one call, atomic with respect to fork — and
// reports the command's status. An inner keeper, asked the same, kills the
// command's process group, one call too, and ends as when the command does.
// SIGKILL alone ends the namespace only once the init has torn down its own
// memory, which takes locks (a shared file's i_mmap lock) that a few hundred
// forking processes hold in turn: that held the init's exit, and so the zap
// of its namespace, back for up to 50 s.
#define kill_tree_signal (SIGRTMIN + 4)

extern pid_t dshr_child;
extern int dshr_pid1;
extern int dshr_leader_unreaped;
void dshr_kill_tree(void);
__attribute__((noreturn)) void dshr_supervise(int sfd);
void dshr_seal_process(void);
__attribute__((noreturn)) void dshr_relay(pid_t init, int subreaper);

// runner_filter_linux.c: the seccomp program, the Landlock signal scope.

extern char dshr_bpf[SPEC_MAX];
extern char *dshr_bpf_g;
extern ssize_t dshr_blen_g;
ssize_t dshr_recv_bpf(char *buf, size_t cap, int *ruleset);
void dshr_nest_signal_scope(void);
void dshr_load_filter(int notify, int mount_view);

// runner_net_linux.c: the sandbox's loopback and egress listeners.

void dshr_loopback_up(void);
void dshr_egress_listeners(void);

#endif
