"""Tests of the example harness against a real dsh-sandbox-run.

    DSH_SANDBOX_RUN=bin/dsh-sandbox-run python3 -m unittest -v test_dsh_sandbox

(examples/python's Go test builds the binary and runs this.)
"""

import contextlib
import io
import os
import tempfile
import unittest

import dsh_sandbox


def _writable_anyway(path):
    """Whether workspace-write makes path writable whatever the workspace."""
    roots = ["/tmp", "/dev/shm"] + ([os.environ["TMPDIR"]] if os.environ.get("TMPDIR") else [])
    path = os.path.realpath(path)
    return any(os.path.commonpath([path, os.path.realpath(r)]) == os.path.realpath(r)
               for r in roots)


class HarnessTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="dsh-py-")
        self.addCleanup(tmp.cleanup)
        self.ws = os.path.realpath(tmp.name)

    def test_allowed_write(self):
        res = dsh_sandbox.run("echo hello > hello.txt && cat hello.txt",
                              mode="workspace-write", workspace=self.ws)
        self.assertEqual(res.exit_code, 0, res.stderr)
        self.assertEqual(res.stdout, "hello\n")
        self.assertFalse(res.denied, res.denials)
        self.assertIn(res.enforcement.level, ("full", "partial"))
        self.assertTrue(os.path.exists(os.path.join(self.ws, "hello.txt")))
        hello = os.path.join(self.ws, "hello.txt")
        self.assertIn(dsh_sandbox.Change(op="created", path=hello, type="file", size=6,
                                         mode="0644"), res.changes)
        self.assertIn(f"created {hello}", res.facts())
        self.assertIsNotNone(res.duration_ms)
        if res.usage is not None and res.usage.cpu_time_ms is not None:
            self.assertGreaterEqual(res.usage.cpu_time_ms, 0)

    def test_denied_write_is_a_fact(self):
        target = os.path.join(self.ws, "denied.txt")
        res = dsh_sandbox.run("echo x > denied.txt", mode="read-only", workspace=self.ws)
        self.assertNotEqual(res.exit_code, 0)
        self.assertTrue(res.denied)
        writes = [d for d in res.denials if d.op == "write"]
        self.assertEqual([d.path for d in writes], [target], res.denials)
        self.assertEqual(writes[0].errno, "EROFS")
        self.assertFalse(os.path.exists(target), "the denied write went through")
        self.assertEqual(writes[0].suggest_flag, "--mode workspace-write")
        self.assertIn(f"denied write {target} ({writes[0].syscall} EROFS); allow with "
                      "--mode workspace-write", res.facts())

    def test_denied_write_outside_the_workspace(self):
        base = next((b for b in ("/var/tmp", os.path.expanduser("~"))
                     if os.path.isdir(b) and os.access(b, os.W_OK) and not _writable_anyway(b)),
                    None)
        if base is None:
            self.skipTest("no directory outside /tmp, $TMPDIR and /dev/shm to write to")
        outside = tempfile.TemporaryDirectory(prefix="dsh-py-outside-", dir=base)
        self.addCleanup(outside.cleanup)
        target = os.path.join(os.path.realpath(outside.name), "escape.txt")
        res = dsh_sandbox.run(f"echo pwned > '{target}'", mode="workspace-write",
                              workspace=self.ws)
        self.assertNotEqual(res.exit_code, 0)
        self.assertIn(target, [d.path for d in res.denials if d.op == "write"])
        self.assertFalse(os.path.exists(target))

    def test_network_denied_is_a_fact(self):
        # In a net namespace of its own the command has a loopback (and
        # the connect is refused); without one, no inet socket at all.
        res = dsh_sandbox.run("echo > /dev/tcp/192.0.2.1/9", workspace=self.ws)
        self.assertNotEqual(res.exit_code, 0)
        self.assertTrue(any((d.op, d.address) in (("connect", "192.0.2.1:9"), ("socket", "AF_INET"))
                            for d in res.denials), res.denials)

    def test_setup_failure_raises(self):
        with self.assertRaises(dsh_sandbox.SandboxError) as cm:
            dsh_sandbox.run("true", mode="workspace-write", workspace="/")
        self.assertIn("refusing to make workspace / writable", str(cm.exception))
        self.assertEqual(cm.exception.report["exitCode"], dsh_sandbox.EXIT_SETUP)

    def test_exit_status_and_signal(self):
        res = dsh_sandbox.run("exit 7", workspace=self.ws)
        self.assertEqual(res.exit_code, 7)
        res = dsh_sandbox.run("kill -TERM $$", workspace=self.ws)
        self.assertEqual((res.exit_code, res.signal), (143, "SIGTERM"))

    def test_main_prints_the_facts(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = dsh_sandbox.main(["--workspace", self.ws, "echo x > f.txt"])
        self.assertNotEqual(rc, 0)
        self.assertIn(f"sandbox: denied write {os.path.join(self.ws, 'f.txt')} (", out.getvalue())
        self.assertIn(f"sandbox: exit code: {rc}", out.getvalue())


if __name__ == "__main__":
    unittest.main()
