package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// maxRecordsSize bounds a records file read: larger is not one this
// program wrote for a workspace (20,200 directories took 650 KB).
const maxRecordsSize = 256 << 20

// auditRecords keeps what the post-run audit read of a workspace's
// directories from one dsh-sandbox-run to the next (sandbox.AuditCache's
// records), in the sandbox's state directory, which every confined command
// has hidden: a command's start walk then stats an unchanged directory
// instead of listing it, as an executor's does without its watches. A file
// it cannot use (missing, another user's, damaged) only costs that walk.
type auditRecords struct {
	dir, name string // dir: canonical, outside every writable root
	cache     sandbox.AuditCache
}

// openAuditRecords returns the records of p's workspace, read from the
// state directory ($XDG_STATE_HOME/dsh-sandbox, else
// ~/.local/state/dsh-sandbox, as for the transaction key), or nil where the
// audit does not run or the records could not be kept out of the command's
// reach.
func openAuditRecords(p modes.Policy, getenv func(string) string) *auditRecords {
	if len(p.AuditedRoots()) == 0 {
		return nil
	}
	state := ""
	if s := getenv("XDG_STATE_HOME"); filepath.IsAbs(s) {
		state = filepath.Join(s, filepath.Base(modes.HomeStateDir))
	} else if h := getenv("HOME"); filepath.IsAbs(h) {
		state = filepath.Join(h, modes.HomeStateDir)
	} else {
		return nil
	}
	dir, err := canonical(filepath.Join(state, "audit"))
	if err != nil || !outsideWritable(p, dir) {
		return nil
	}
	sum := sha256.Sum256([]byte(p.Workspace))
	r := &auditRecords{dir: dir, name: hex.EncodeToString(sum[:16]) + ".records"}
	r.read()
	return r
}

// canonical returns path with every symlink of its existing part resolved,
// the rest (missing) as it is; a dangling symlink is an error.
func canonical(path string) (string, error) {
	var rest []string
	for p := path; ; p = filepath.Dir(p) {
		c, err := filepath.EvalSymlinks(p)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{c}, rest...)...), nil
		}
		if _, lerr := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || lerr == nil || p == "/" {
			return "", err
		}
		rest = append(rest, filepath.Base(p))
	}
}

// outsideWritable reports whether the canonical directory dir lies outside
// every writable root of p.
func outsideWritable(p modes.Policy, dir string) bool {
	for _, w := range p.WritableRoots {
		if modes.Within(dir, w) {
			return false
		}
	}
	return true
}

// read takes the records from the file, if it is one this user wrote.
func (r *auditRecords) read() {
	f, err := os.OpenFile(filepath.Join(r.dir, r.name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) ||
		st.Mode&0o022 != 0 || st.Size > maxRecordsSize {
		return
	}
	// Read now (the file is closed on return), decoded beside the
	// command's start.
	data, err := io.ReadAll(io.LimitReader(f, maxRecordsSize))
	if err != nil {
		return
	}
	r.cache.LoadRecords(bytes.NewReader(data))
}

// auditCache is the cache for the command (nil: none).
func (r *auditRecords) auditCache() *sandbox.AuditCache {
	if r == nil {
		return nil
	}
	return &r.cache
}

// save writes the records, once the command's processes are gone, when a
// walk listed a directory since they were read: to a new file renamed over
// the old, so that a reader sees the old records or the new, whole.
// Failing to keep them fails nothing.
func (r *auditRecords) save(p modes.Policy) {
	if r == nil || !r.cache.RecordsChanged() {
		return
	}
	var buf bytes.Buffer
	if changed, err := r.cache.WriteRecords(&buf); err != nil || !changed {
		return
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return
	}
	dir, err := filepath.EvalSymlinks(r.dir)
	if err != nil || dir != r.dir || !outsideWritable(p, dir) {
		return // moved while the command ran
	}
	f, err := os.CreateTemp(dir, ".records-*")
	if err != nil {
		return
	}
	_, err = f.Write(buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, r.name)
	_, lerr := os.Lstat(path)
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return
	}
	if lerr != nil {
		prune(dir, r.name)
	}
}

// keptRecords is how many workspaces' records the state directory keeps:
// when a new one is written, the least recently written beyond are removed.
const keptRecords = 64

// prune removes from dir the records files beyond the keptRecords most
// recently written (never keep), and temporary files an hour old (left by a
// process that died writing).
func prune(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name(), ".records-"):
			if time.Since(fi.ModTime()) > time.Hour {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		case strings.HasSuffix(e.Name(), ".records") && e.Name() != keep:
			files = append(files, file{e.Name(), fi.ModTime()})
		}
	}
	if len(files) < keptRecords {
		return
	}
	slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
	for _, f := range files[keptRecords-1:] {
		os.Remove(filepath.Join(dir, f.name))
	}
}
