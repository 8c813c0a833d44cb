// Package runner owns the runner and the supervisor's side of its processes.
//
// The runner is C (runner_*_linux.c, runner_linux.h), compiled here by cgo
// (runner_cgo_linux.go) and run from an ELF constructor before the Go runtime
// starts: every binary that links this package — every binary importing
// package sandbox does — becomes a runner when re-executed with argv[0]
// [Arg0] and [EnvVar]=1, and never reaches main. It creates the namespaces,
// builds the mount view, drops privileges, enforces Landlock and seccomp,
// starts the command and stays as its relay, keeper or pid-namespace init.
// Re-executed with [EnvVar]=[EnvSession] it is a session runner instead
// (runner_session_linux.c): it makes the user, UTS and net namespaces a
// session's commands share and forks each command's runner in them, as the
// supervisor's child ([SessionTokens], [SessionCommand]); it never runs a
// command itself and ends with its socket.
//
// The Go side here is the control protocol ([Msg], [SpecTokens], [SendMsg],
// [RecvMsg]: JSON messages and SCM_RIGHTS over a SOCK_SEQPACKET pair, the
// runner's fd 3) and [Tree], which reaps the relay and kills the tree
// ([Tree.Kill], [KillSession], [KillDescendants]).
//
// Nothing here decides policy: the runner applies what package sandbox
// prepared and reports what it applied. Tree must never ask the runner's
// processes for anything it needs — a stopped relay, keeper or init cannot
// answer, and SIGKILL needs no answer — so every wait is bounded ([LostWait]
// and the kill rounds), and a pid is signalled only through a pidfd or after
// checking it still names the same process. The C runner applies the layers
// in a fixed order before it starts the command (package sandbox's doc lists
// it) and must never outlive its supervisor's control socket: when it closes,
// the runner kills the command's tree.
package runner
