#!/usr/bin/env python3
"""Run shell commands through dsh-sandbox-run and read what it enforced.

A harness in Python needs no bindings: it runs

    dsh-sandbox-run --report FILE --mode MODE --workspace DIR -- bash -c COMMAND

and reads FILE, the JSON report (README, "Report JSON"): the enforcement the
host gave, the exit status, and every denial as a fact (operation, path or
address, system call, errno, count), observed by the sandbox rather than
guessed from stderr. Standard library only.

As a program:

    python3 dsh_sandbox.py --mode workspace-write --workspace DIR -- 'make test'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

# dsh-sandbox-run's exit status when the sandbox could not be set up: the
# command never ran, and the report's "error" says why.
EXIT_SETUP = 125

MODES = ("read-only", "workspace-write", "danger-full-access")


class SandboxError(Exception):
    """The sandbox could not be set up (exit status 125): nothing ran."""

    def __init__(self, message: str, report: Optional[dict] = None):
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Denial:
    """One distinct denied operation, as the sandbox observed it."""

    op: str
    syscall: str = ""
    errno: str = ""
    count: int = 1
    path: str = ""
    address: str = ""
    reason: str = ""
    # How to allow it: the flag ("--allow-write /srv"), or why nothing does.
    suggest_flag: str = ""
    cannot: str = ""

    @classmethod
    def from_json(cls, d: dict) -> "Denial":
        suggest = d.get("suggest") or {}
        return cls(op=d["op"], syscall=d.get("syscall", ""), errno=d.get("errno", ""),
                   count=d.get("count", 1), path=d.get("path", ""),
                   address=d.get("address", ""), reason=d.get("reason", ""),
                   suggest_flag=suggest.get("flag", ""), cannot=suggest.get("cannot", ""))

    @property
    def target(self) -> str:
        """The path, or else the address (AF_INET, 1.2.3.4:80, @name, pid N)."""
        return self.path or self.address

    def __str__(self) -> str:
        s = f"denied {self.op} {self.target}".rstrip()
        details = " ".join(x for x in (self.syscall, self.errno) if x)
        if self.count != 1:
            details += f", {self.count}x"
        if self.reason:
            details += f", {self.reason}"
        s = f"{s} ({details})" if details else s
        if self.suggest_flag:
            s += f"; allow with {self.suggest_flag}"
        elif self.cannot:
            s += f"; {self.cannot}"
        return s


@dataclass(frozen=True)
class Change:
    """One path the command created, modified, removed, renamed or chmodded."""

    op: str
    path: str
    from_path: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""

    @classmethod
    def from_json(cls, d: dict) -> "Change":
        return cls(op=d["op"], path=d["path"], from_path=d.get("from", ""),
                   type=d.get("type", ""), size=d.get("size", 0), mode=d.get("mode", ""))

    def __str__(self) -> str:
        if self.from_path:
            return f"{self.op} {self.from_path} -> {self.path}"
        return f"{self.op} {self.path}"


@dataclass(frozen=True)
class Usage:
    """What the command used, where a cgroup measured it (None: not measured)."""

    peak_memory_bytes: Optional[int] = None
    cpu_time_ms: Optional[int] = None
    peak_pids: Optional[int] = None

    @classmethod
    def from_json(cls, d: dict) -> "Usage":
        return cls(peak_memory_bytes=d.get("peakMemoryBytes"), cpu_time_ms=d.get("cpuTimeMs"),
                   peak_pids=d.get("peakPids"))


@dataclass(frozen=True)
class Enforcement:
    """What the host enforced: level full, partial or none."""

    level: str
    layers: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    landlock_abi: int = 0
    limits: str = ""

    @classmethod
    def from_json(cls, d: dict) -> "Enforcement":
        return cls(level=d.get("level", ""), layers=list(d.get("layers") or []),
                   missing=list(d.get("missing") or []),
                   landlock_abi=d.get("landlockAbi", 0), limits=d.get("limits", ""))


@dataclass(frozen=True)
class Result:
    """A command's outcome: its output, exit status and the report's facts."""

    exit_code: int
    stdout: str
    stderr: str
    mode: str
    enforcement: Enforcement
    denials: List[Denial]
    denials_dropped: int = 0
    changes: List[Change] = field(default_factory=list)
    changes_dropped: int = 0
    usage: Optional[Usage] = None
    duration_ms: Optional[int] = None
    timed_out: bool = False
    signal: str = ""
    report: dict = field(default_factory=dict, repr=False)

    @property
    def denied(self) -> bool:
        """Whether the sandbox denied anything (resource limits aside)."""
        return any(d.op != "limit" for d in self.denials)

    def facts(self) -> List[str]:
        """The report as lines a person (or a model) can read."""
        e = self.enforcement
        lines = [f"mode: {self.mode}, enforcement: {e.level}"
                 + (f" (missing: {', '.join(e.missing)})" if e.missing else "")]
        if e.layers:
            lines.append(f"layers: {', '.join(e.layers)}"
                         + (f"; landlock abi {e.landlock_abi}" if e.landlock_abi else ""))
        lines.extend(str(d) for d in self.denials)
        if self.denials_dropped:
            lines.append(f"... and {self.denials_dropped} more denied calls not recorded")
        lines.extend(str(c) for c in self.changes)
        if self.changes_dropped:
            lines.append(f"... and {self.changes_dropped} more changes")
        u = self.usage
        if u and u.peak_memory_bytes is not None:
            lines.append(f"peak memory: {u.peak_memory_bytes} bytes, cpu: {u.cpu_time_ms} ms")
        if self.timed_out:
            lines.append("timed out")
        status = f"exit code: {self.exit_code}"
        if self.signal:
            status += f" (killed by {self.signal})"
        lines.append(status)
        return lines


def find_binary() -> str:
    """dsh-sandbox-run from $DSH_SANDBOX_RUN, else from PATH."""
    path = os.environ.get("DSH_SANDBOX_RUN") or shutil.which("dsh-sandbox-run")
    if not path:
        raise FileNotFoundError("dsh-sandbox-run not found: put it on PATH or set DSH_SANDBOX_RUN")
    return path


def run(command: str, *, mode: str = "read-only", workspace: Optional[str] = None,
        extra_args: Sequence[str] = (), timeout_ms: Optional[int] = None,
        binary: Optional[str] = None, stdin: Optional[str] = None) -> Result:
    """Run `bash -c command` confined by mode, with workspace as its workspace.

    extra_args are more dsh-sandbox-run flags (--allow-write DIR,
    --allow-domain NAME, --max-memory 1G, ...). Raises SandboxError when the
    sandbox could not be set up; a command that fails is a Result.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    workspace = os.path.realpath(workspace or os.getcwd())
    # The report goes to a file without a name (O_TMPFILE, or unlinked at
    # once) that dsh-sandbox-run opens as /dev/fd/N: a command that may write
    # /tmp cannot replace it, as it could a report file in /tmp.
    with tempfile.TemporaryFile() as rep:
        argv = [binary or find_binary(), "--report", f"/dev/fd/{rep.fileno()}", "--quiet",
                "--mode", mode, "--workspace", workspace, *extra_args]
        if timeout_ms is not None:
            argv += ["--timeout", str(timeout_ms)]
        argv += ["--", "bash", "-c", command]
        proc = subprocess.run(argv, cwd=workspace, input=stdin, capture_output=True, text=True,
                              errors="replace", pass_fds=(rep.fileno(),), check=False)
        rep.seek(0)
        try:
            report = json.loads(rep.read())
        except ValueError as e:
            # No report: a usage error, or a binary that is not dsh-sandbox-run.
            raise SandboxError(proc.stderr.strip() or f"no report ({e})") from e
    if report.get("error") and proc.returncode == EXIT_SETUP:
        raise SandboxError(report["error"], report)
    facts = report.get("sandbox") or {}
    return Result(
        exit_code=report.get("exitCode", proc.returncode),
        stdout=proc.stdout,
        stderr=proc.stderr,
        mode=facts.get("mode", mode),
        enforcement=Enforcement.from_json(facts.get("enforcement") or {}),
        denials=[Denial.from_json(d) for d in facts.get("denials") or []],
        denials_dropped=facts.get("denialsDropped", 0),
        changes=[Change.from_json(c) for c in facts.get("changes") or []],
        changes_dropped=facts.get("changesDropped", 0),
        usage=Usage.from_json(facts["usage"]) if facts.get("usage") else None,
        duration_ms=report.get("durationMs"),
        timed_out=report.get("timedOut", False),
        signal=report.get("signal", ""),
        report=report,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a shell command in dsh-sandbox and show what it enforced.")
    parser.add_argument("--mode", choices=MODES, default="read-only")
    parser.add_argument("--workspace", help="the workspace (default: the current directory)")
    parser.add_argument("--timeout", type=int, metavar="MS", help="timeout in milliseconds")
    parser.add_argument("--binary", help="dsh-sandbox-run (default: $DSH_SANDBOX_RUN, PATH)")
    parser.add_argument("command", help="the shell command (run with bash -c)")
    args = parser.parse_args(argv)
    try:
        res = run(args.command, mode=args.mode, workspace=args.workspace,
                  timeout_ms=args.timeout, binary=args.binary)
    except (SandboxError, FileNotFoundError) as e:
        print(f"sandbox: {e}", file=sys.stderr)
        return EXIT_SETUP
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    for line in res.facts():
        print(f"sandbox: {line}")
    return res.exit_code


if __name__ == "__main__":
    sys.exit(main())
