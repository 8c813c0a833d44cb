package transaction

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trash removes name in wsfd (rel in the workspace) by renaming it to a
// journaled trash name in its directory (one atomic step) and then
// deleting the trash; an interrupted commit finishes the deletion from the
// journal.
func (a *applier) trash(wsfd int, name, rel string) error {
	trashName, err := a.journaledName(rel, trashPrefix)
	if err != nil {
		return err
	}
	if err := unix.Renameat(wsfd, name, wsfd, trashName); err != nil {
		return fmt.Errorf("apply: remove %s: %w", filepath.Join(a.v.t.workspace, rel), err)
	}
	if err := removeAllAt(wsfd, trashName); err != nil {
		return fmt.Errorf("apply: remove %s: %w", filepath.Join(a.v.t.workspace, rel), err)
	}
	return nil
}

// journaledName picks a random name next to rel (a path relative to the
// workspace) and records it, relative to the workspace, in the journal
// (fsynced) before anything is created under it. It returns the name.
func (a *applier) journaledName(rel, prefix string) (string, error) {
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	name := prefix + hex.EncodeToString(random[:])
	if a.journal == nil {
		fd, err := unix.Openat(a.dirfd, journalName, unix.O_CREAT|unix.O_APPEND|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return "", fmt.Errorf("apply: open journal: %w", err)
		}
		a.journal = os.NewFile(uintptr(fd), journalName)
	}
	line := strconv.Quote(filepath.Join(filepath.Dir(rel), name)) + "\n"
	if _, err := a.journal.WriteString(line); err != nil {
		return "", fmt.Errorf("apply: write journal: %w", err)
	}
	if err := a.journal.Sync(); err != nil {
		return "", fmt.Errorf("apply: write journal: %w", err)
	}
	return name, nil
}

func (a *applier) closeJournal() error {
	if a.journal == nil {
		return nil
	}
	err := a.journal.Close()
	a.journal = nil
	if err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}

// finishJournal deletes the trash and temporary files an interrupted
// commit recorded, then the journal. It only deletes names this package
// makes, beneath the workspace and without following a symlink, so a
// damaged journal cannot remove anything else.
func (a *applier) finishJournal(dirfd int) error {
	fd, err := openAt(dirfd, journalName, unix.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	f := os.NewFile(uintptr(fd), journalName)
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentBytes))
	f.Close()
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for scanner.Scan() {
		rel, err := strconv.Unquote(scanner.Text())
		if err != nil {
			continue // a line torn by a crash: nothing was created under it
		}
		base := filepath.Base(rel)
		if !strings.HasPrefix(base, trashPrefix) || !filepath.IsLocal(rel) {
			return fmt.Errorf("journal of %s names an unexpected path %q", a.v.t.dir, rel)
		}
		if err := removeBeneath(a.v.ws, rel); err != nil {
			return fmt.Errorf("finish removing %s: %w", rel, err)
		}
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	if err := unix.Unlinkat(dirfd, journalName, 0); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	return nil
}

// removeBeneath removes rel (and all under it) beneath the directory
// dirfd, following no symlink; a missing parent means nothing to remove.
func removeBeneath(dirfd int, rel string) error {
	dir := filepath.Dir(rel)
	if dir == "." {
		return removeAllAt(dirfd, rel)
	}
	p, err := openBeneath(dirfd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(p)
	return removeAllAt(p, filepath.Base(rel))
}
