package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestAuditRecordsPlace: the records of a workspace-write command's
// workspace live in the state directory ($XDG_STATE_HOME/dsh-sandbox, else
// ~/.local/state/dsh-sandbox), one file per workspace; none where the audit
// does not run, where no state directory can be named, or where it would lie
// in a writable root — and nothing is made there.
func TestAuditRecordsPlace(t *testing.T) {
	// (Not under /tmp, a writable root of every workspace-write policy.)
	home, err := os.MkdirTemp("/var/tmp", "dsh-records-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	ws, other := t.TempDir(), t.TempDir()
	ww, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	ww2, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: other})
	require.NoError(t, err)
	ro, err := modes.Derive(modes.Options{Mode: modes.ReadOnly, Workspace: ws})
	require.NoError(t, err)
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	state, err := filepath.EvalSymlinks(home)
	require.NoError(t, err)
	r := openAuditRecords(ww, env("HOME", home))
	require.NotNil(t, r)
	assert.Equal(t, filepath.Join(state, modes.HomeStateDir, "audit"), r.dir)
	r2 := openAuditRecords(ww2, env("HOME", home))
	require.NotNil(t, r2)
	assert.NotEqual(t, r.name, r2.name, "one file per workspace")
	r = openAuditRecords(ww, env("HOME", home, "XDG_STATE_HOME", filepath.Join(home, "xdg")))
	require.NotNil(t, r)
	assert.Equal(t, filepath.Join(state, "xdg/dsh-sandbox/audit"), r.dir)

	assert.Nil(t, openAuditRecords(ro, env("HOME", home)), "read-only: no audit")
	assert.Nil(t, openAuditRecords(ww, env("HOME", t.TempDir())), "in /tmp, a writable root")
	assert.Nil(t, openAuditRecords(ww, env("HOME", "relative")), "no state directory")
	assert.Nil(t, openAuditRecords(ww, env("HOME", home, "XDG_STATE_HOME", filepath.Join(ws, "state"))), "in the workspace")
	require.NoError(t, os.Symlink(filepath.Join(ws, "state"), filepath.Join(home, "link")))
	assert.Nil(t, openAuditRecords(ww, env("HOME", home, "XDG_STATE_HOME", filepath.Join(home, "link"))), "through a link into the workspace")
	_, err = os.Lstat(filepath.Join(ws, "state"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing made in the workspace")
}

// TestAuditRecordsRead: records are read only from a regular file of this
// user's that no one else can write; anything else is not read (and a
// later save replaces it).
func TestAuditRecordsRead(t *testing.T) {
	dir := t.TempDir()
	// One root with one record, in the format of sandbox/internal/audit.
	var b []byte
	b = append(b, "dsh-sandbox audit records 1\n"...)
	b = binary.AppendUvarint(b, uint64(len(dir)))
	b = append(b, dir...)
	b = append(b, 1, 1, '.', 7, 9)  // one record: ".", dev 7, ino 9
	b = binary.AppendVarint(b, 1e9) // its change time
	b = binary.AppendVarint(b, 5)   // (nanoseconds)
	b = append(b, 0, 0)             // no entries; the end of the roots
	valid := binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	var empty bytes.Buffer
	var none auditRecords
	_, err := none.cache.WriteRecords(&empty)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		make func(p string)
		read bool
	}{
		{"this user's, 0600", func(p string) { require.NoError(t, os.WriteFile(p, valid, 0o600)) }, true},
		{"group-writable", func(p string) {
			require.NoError(t, os.WriteFile(p, valid, 0o620))
			require.NoError(t, os.Chmod(p, 0o620))
		}, false},
		{"a symlink", func(p string) {
			require.NoError(t, os.WriteFile(p+".real", valid, 0o600))
			require.NoError(t, os.Symlink(p+".real", p))
		}, false},
		{"a directory", func(p string) { require.NoError(t, os.Mkdir(p, 0o700)) }, false},
		{"damaged", func(p string) { require.NoError(t, os.WriteFile(p, append(bytes.Clone(valid), 'x'), 0o600)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("%x.records", len(tc.name))
			tc.make(filepath.Join(dir, name))
			r := &auditRecords{dir: dir, name: name}
			r.read()
			var out bytes.Buffer
			_, err := r.cache.WriteRecords(&out)
			require.NoError(t, err)
			if tc.read {
				assert.Equal(t, valid, out.Bytes(), "the records read")
			} else {
				assert.Equal(t, empty.Bytes(), out.Bytes(), "no records")
			}
		})
	}
}

// TestAuditRecordsPrune: writing a new workspace's records keeps the
// keptRecords most recent files, and removes temporary files an hour old.
func TestAuditRecordsPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for i := range keptRecords + 5 {
		p := filepath.Join(dir, fmt.Sprintf("%02d.records", i))
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		at := now.Add(-time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(p, at, at))
	}
	old, fresh := filepath.Join(dir, ".records-1"), filepath.Join(dir, ".records-2")
	require.NoError(t, os.WriteFile(old, nil, 0o600))
	require.NoError(t, os.Chtimes(old, now.Add(-2*time.Hour), now.Add(-2*time.Hour)))
	require.NoError(t, os.WriteFile(fresh, nil, 0o600))
	keep := fmt.Sprintf("%02d.records", keptRecords+4) // the oldest: the one just written
	prune(dir, keep)
	for i := range keptRecords + 5 {
		name := fmt.Sprintf("%02d.records", i)
		_, err := os.Stat(filepath.Join(dir, name))
		if i < keptRecords-1 || name == keep {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorIs(t, err, os.ErrNotExist, name)
		}
	}
	assert.NoFileExists(t, old)
	assert.FileExists(t, fresh)
}
