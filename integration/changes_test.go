//go:build linux

package integration

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestChangeFacts: the report lists what the command changed in its
// workspace, as root and as an unprivileged user, and nothing it only read,
// made and removed again, or was denied.
func TestChangeFacts(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newFSEnv(t, id, "workspace-write")
		ws := e.ws
		for name, content := range map[string]string{"keep": "old\n", "gone": "x\n", "mv": "m\n", "edit": "e\n", "run.sh": "#!/bin/sh\n", "read": "r\n"} {
			id.writeOwned(t, filepath.Join(ws, name), content, 0o644)
		}
		r := e.run(t, strings.Join([]string{
			"set -e",
			"echo hi > new",
			"echo more >> keep",
			"rm gone",
			"mv mv moved",
			"mkdir -p d/e && printf 12345 > d/e/f",
			"chmod 755 run.sh",
			"t=$(mktemp -p .) && echo tmp > $t && rm $t", // made and removed: no change
			"echo n > .edit.tmp && mv .edit.tmp edit",    // an editor's save
			"cat read > /dev/null",
			"ln -s new link",
			// A socket file: the supervisor binds it for the command.
			`python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'`,
			"echo x > $OUT/denied || true", // denied: not a change
		}, "\n"))
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		rep := requireReport(t, r)
		if rep.ChangesDropped == nil {
			t.Fatalf("the report has no changesDropped: %s", trunc(r.ReportRaw))
		}
		if *rep.ChangesDropped != 0 {
			t.Errorf("changesDropped = %d, want 0", *rep.ChangesDropped)
		}
		p := func(n string) string { return filepath.Join(ws, n) }
		want := []Change{
			{Op: "created", Path: p("new"), Type: "file", Size: 3, Mode: "0644"},
			{Op: "modified", Path: p("keep"), Type: "file", Size: 9, Mode: "0644"},
			{Op: "removed", Path: p("gone")},
			{Op: "renamed", Path: p("moved"), From: p("mv"), Type: "file", Size: 2, Mode: "0644"},
			{Op: "created", Path: p("d"), Type: "dir", Mode: "0755"},
			{Op: "created", Path: p("d/e"), Type: "dir", Mode: "0755"},
			{Op: "created", Path: p("d/e/f"), Type: "file", Size: 5, Mode: "0644"},
			{Op: "mode", Path: p("run.sh"), Type: "file", Size: 10, Mode: "0755"},
			{Op: "modified", Path: p("edit"), Type: "file", Size: 2, Mode: "0644"},
			{Op: "created", Path: p("link"), Type: "symlink", Mode: "0777"},
			{Op: "created", Path: p("sock"), Type: "other", Mode: "0755"},
		}
		for i := range want {
			want[i].Root = ws // each change names its writable root
		}
		if !reflect.DeepEqual(rep.Changes, want) {
			t.Fatalf("changes = %+v\nwant %+v", rep.Changes, want)
		}
		requireAbsent(t, filepath.Join(e.out, "denied"))
		requireDenial(t, r, "workspace-write", "write", filepath.Join(e.out, "denied"))
	})
}

// TestChangeFactsOnlyWhereConfined: read-only denies every write and lists
// no change; danger-full-access has no supervisor and lists none either
// (an empty list, never a missing one).
func TestChangeFactsOnlyWhereConfined(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range []string{"read-only", "danger-full-access"} {
			t.Run(mode, func(t *testing.T) {
				e := newFSEnv(t, id, mode)
				r := e.run(t, "echo hi > new; rm -f inside; true")
				rep := requireReport(t, r)
				if rep.Changes == nil {
					t.Errorf("changes must be a list: %s", r.ReportRaw)
				}
				if len(rep.Changes) != 0 {
					t.Errorf("changes = %+v, want none", rep.Changes)
				}
				if mode == "read-only" {
					requireAbsent(t, filepath.Join(e.ws, "new"))
					requireContent(t, filepath.Join(e.ws, "inside"), existingContent)
				}
			})
		}
	})
}

// TestChangeFactsCapped: past MaxChanges (1000) the changes are counted,
// not listed.
func TestChangeFactsCapped(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newFSEnv(t, id, "workspace-write")
		r := e.run(t, "mkdir many && cd many && for i in $(seq 1203); do : > f$i; done")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		rep := requireReport(t, r)
		if len(rep.Changes) != 1000 {
			t.Fatalf("%d changes listed, want 1000", len(rep.Changes))
		}
		if rep.ChangesDropped == nil {
			t.Fatalf("the report has no changesDropped: %s", trunc(r.ReportRaw))
		}
		if *rep.ChangesDropped != 204 { // many/ and 1203 files, 1000 listed
			t.Errorf("changesDropped = %d, want 204", *rep.ChangesDropped)
		}
		if want := (Change{Op: "created", Path: filepath.Join(e.ws, "many"), Type: "dir", Mode: "0755", Root: e.ws}); rep.Changes[0] != want {
			t.Errorf("first change = %+v, want %+v", rep.Changes[0], want)
		}
		if want := filepath.Join(e.ws, "many", "f1"); rep.Changes[1].Path != want {
			t.Errorf("second change's path = %q, want %q", rep.Changes[1].Path, want)
		}
		n := 0
		entries, err := os.ReadDir(filepath.Join(e.ws, "many"))
		if err != nil {
			t.Fatal(err)
		}
		for range entries {
			n++
		}
		if n != 1203 {
			t.Fatalf("files made: %d, want 1203", n)
		}
	})
}

// TestChangeFactsCappedPerRoot: the cap is per writable root: 5,000 files
// written under an --allow-write directory cannot crowd out the three the
// command then writes in the workspace.
func TestChangeFactsCappedPerRoot(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newFSEnv(t, id, "workspace-write")
		extra := id.outside(t)
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", e.ws, "--allow-write", extra),
			Argv: bash(`cd ` + extra + ` && for i in $(seq 5000); do : > f$i; done && cd - >/dev/null && echo a > a && echo b > b && echo c > c`),
			Dir:  e.ws})
		requireExit(t, r, 0)
		rep := requireReport(t, r)
		var ws []string
		inExtra := 0
		for _, c := range rep.Changes {
			switch c.Root {
			case e.ws:
				ws = append(ws, c.Path)
			case extra:
				inExtra++
			default:
				t.Errorf("change %+v: root %q, want the workspace or %s", c, c.Root, extra)
			}
		}
		if want := []string{filepath.Join(e.ws, "a"), filepath.Join(e.ws, "b"), filepath.Join(e.ws, "c")}; !reflect.DeepEqual(ws, want) {
			t.Errorf("the workspace's changes = %q, want %q", ws, want)
		}
		if inExtra != 1000 {
			t.Errorf("%d changes listed in %s, want 1000", inExtra, extra)
		}
		if rep.ChangesDropped == nil || *rep.ChangesDropped != 4000 || rep.ChangesDroppedByRoot[extra] != 4000 {
			t.Errorf("changesDropped = %v, by root %v; want 4000, all in %s", rep.ChangesDropped, rep.ChangesDroppedByRoot, extra)
		}
	})
}

// TestExecutorChangeFacts: the executor's result carries the change facts,
// foreground and background, and the spill files it writes itself are not
// the command's changes.
func TestExecutorChangeFacts(t *testing.T) {
	e := newTestExecutor(t, executor.Config{Mode: modes.WorkspaceWrite})
	ws := e.Workspace()
	res, err := e.Run(context.Background(), executor.Request{Command: "echo a > fg.txt; head -c 200000 /dev/zero | tr '\\0' x"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := []sandbox.Change{{Op: sandbox.ChangeCreated, Path: filepath.Join(ws, "fg.txt"), Type: "file", Size: 2, Mode: "0644", Root: ws}}; !reflect.DeepEqual(res.Sandbox.Changes, want) {
		t.Fatalf("foreground changes = %+v\nwant %+v", res.Sandbox.Changes, want)
	}
	if res.Stdout.SpillPath == "" {
		t.Fatal("the output did not spill to a file: no spill path")
	}

	p, err := e.Start(context.Background(), executor.Request{Command: "mkdir bg && echo b > bg/f"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(30*time.Second))
	defer cancel()
	bg, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want := []sandbox.Change{
		{Op: sandbox.ChangeCreated, Path: filepath.Join(ws, "bg"), Type: "dir", Mode: "0755", Root: ws},
		{Op: sandbox.ChangeCreated, Path: filepath.Join(ws, "bg", "f"), Type: "file", Size: 2, Mode: "0644", Root: ws},
	}; !reflect.DeepEqual(bg.Sandbox.Changes, want) {
		t.Fatalf("background changes = %+v\nwant %+v", bg.Sandbox.Changes, want)
	}
}
