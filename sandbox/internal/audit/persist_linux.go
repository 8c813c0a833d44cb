package audit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The records of a Cache, kept between processes (WriteRecords,
// ReadRecords): a process that lives for one command (the CLI) holds no
// watches, but a record checks itself by the directory's identity and
// change time, so an earlier process's records serve its start walk as they
// would serve the end's. Only records their change time vouches for are
// kept (a watch means nothing to another process).
//
// The format, in order: recordsMagic; per audited root its path and its
// record count, then per record its path relative to the root, device,
// inode, change time (seconds, nanoseconds) and entries (name, flags);
// a zero-length root path ends the list; then the CRC-32C (Castagnoli) of
// everything before it. Strings and counts are uvarints, the times varints.

const recordsMagic = "dsh-sandbox audit records 1\n"

// Bounds of what ReadRecords takes: a longer path or name than the kernel
// allows, or more records or entries than these, is a damaged file.
const (
	maxRecordPath = unix.PathMax
	maxRecords    = 1 << 24
	maxEntries    = 1 << 20
)

// castagnoli is the records' checksum table, made on first use: making it
// costs ~0.2 ms, which every program linking this package would otherwise
// pay at start, before main (dsh-sandbox-run's start, GODEBUG=inittrace=1).
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// ErrRecords is the error of records ReadRecords cannot take: another
// format, or a damaged or truncated file.
var ErrRecords = errors.New("audit records: not a records file, or damaged")

// RecordsChanged reports whether a walk since the cache was read listed any
// directory: what WriteRecords would report, without writing the records.
func (c *Cache) RecordsChanged() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// (No walk puts before LoadRecords' records are in.)
	return c.listedSinceRead
}

// WriteRecords writes the records of the cache's last walk of each root
// that its change times vouch for, for ReadRecords in a later process. It
// reports whether a walk since the cache was read listed any directory: when
// none did, the records are those it read.
func (c *Cache) WriteRecords(w io.Writer) (changed bool, err error) {
	c.waitLoad()
	c.mu.Lock()
	roots := make([]string, 0, len(c.scans))
	for r := range c.scans {
		roots = append(roots, r)
	}
	scans := make(map[string]*gitScan, len(c.scans))
	for r, sc := range c.scans {
		scans[r] = sc
	}
	changed = c.listedSinceRead
	c.mu.Unlock()
	slices.Sort(roots)

	h := crc32.New(castagnoli())
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	var buf [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	sv := func(v int64) { bw.Write(buf[:binary.PutVarint(buf[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); bw.WriteString(s) }
	bw.WriteString(recordsMagic)
	for _, root := range roots {
		sc := scans[root]
		rels := make([]string, 0, len(sc.read))
		for rel, r := range sc.read {
			if r.ctimeOK {
				rels = append(rels, rel)
			}
		}
		slices.Sort(rels)
		str(root)
		uv(uint64(len(rels)))
		for _, rel := range rels {
			r := sc.read[rel]
			str(rel)
			uv(r.dev)
			uv(r.ino)
			sv(r.ctime.Sec)
			sv(r.ctime.Nsec)
			uv(uint64(len(r.ents)))
			for _, e := range r.ents {
				str(e.name)
				var f byte
				if e.isDir {
					f |= 1
				}
				if e.whiteout {
					f |= 2
				}
				bw.WriteByte(f)
			}
		}
	}
	str("")
	if err := bw.Flush(); err != nil {
		return changed, err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], h.Sum32())
	_, err = w.Write(sum[:])
	return changed, err
}

// ReadRecords replaces the cache's records by those WriteRecords wrote,
// read whole from r (which the caller bounds). On an error (ErrRecords for
// data it cannot take) the cache is left as it was: nothing of a damaged
// file is used.
func (c *Cache) ReadRecords(r io.Reader) error {
	c.waitLoad()
	return c.readRecords(r)
}

// LoadRecords is ReadRecords in the background: the cache's next use (a
// walk's, WriteRecords) waits for it. Decoding a large file takes a while
// (20,200 records: ~8 ms here), which a walk beside the command's start
// then pays instead of the command.
func (c *Cache) LoadRecords(r io.Reader) {
	done := make(chan struct{})
	c.mu.Lock()
	prev := c.loading
	c.loading = done
	c.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		_ = c.readRecords(r) // a file it cannot take only costs a walk
	}()
}

// waitLoad waits for LoadRecords' records.
func (c *Cache) waitLoad() { c.waitLoadUnless(nil) }

// waitLoadUnless waits for LoadRecords' records, or for stop to be closed
// (false).
func (c *Cache) waitLoadUnless(stop <-chan struct{}) bool {
	c.mu.Lock()
	l := c.loading
	c.mu.Unlock()
	if l == nil {
		return true
	}
	select {
	case <-l:
		return true
	case <-stop:
		return false
	}
}

func (c *Cache) readRecords(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrRecords, what) }
	if len(data) < len(recordsMagic)+4 || string(data[:len(recordsMagic)]) != recordsMagic {
		return bad("no records header")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli()) != binary.BigEndian.Uint32(data[len(data)-4:]) {
		return bad("checksum mismatch")
	}
	br := bytes.NewReader(body[len(recordsMagic):])
	uv := func(limit uint64) (uint64, error) {
		v, err := binary.ReadUvarint(br)
		if err != nil || v > limit {
			return 0, bad("a count out of range")
		}
		return v, nil
	}
	str := func(limit uint64) (string, error) {
		n, err := uv(limit)
		if err != nil {
			return "", err
		}
		if n > uint64(br.Len()) {
			return "", bad("truncated")
		}
		b := make([]byte, n)
		br.Read(b)
		return string(b), nil
	}
	scans := map[string]*gitScan{}
	for {
		root, err := str(maxRecordPath)
		if err != nil {
			return err
		}
		if root == "" {
			break
		}
		if !filepath.IsAbs(root) || filepath.Clean(root) != root || scans[root] != nil {
			return bad("a root that is not a clean absolute path, or twice")
		}
		n, err := uv(maxRecords)
		if err != nil {
			return err
		}
		read := make(map[string]*dirRecord, min(n, 1<<16))
		for range n {
			rel, err := str(maxRecordPath)
			if err != nil {
				return err
			}
			if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") || read[rel] != nil {
				return bad("a record path that is not a clean relative path, or twice")
			}
			rec := &dirRecord{ctimeOK: true}
			if rec.dev, err = binary.ReadUvarint(br); err != nil {
				return bad("truncated")
			}
			if rec.ino, err = binary.ReadUvarint(br); err != nil {
				return bad("truncated")
			}
			if rec.ctime.Sec, err = binary.ReadVarint(br); err != nil {
				return bad("truncated")
			}
			if rec.ctime.Nsec, err = binary.ReadVarint(br); err != nil || rec.ctime.Nsec < 0 || rec.ctime.Nsec >= 1e9 {
				return bad("a change time out of range")
			}
			ne, err := uv(maxEntries)
			if err != nil {
				return err
			}
			if ne > 0 {
				rec.ents = make([]dirent, 0, min(ne, 1<<10))
			}
			for range ne {
				name, err := str(unix.NAME_MAX)
				if err != nil {
					return err
				}
				f, err := br.ReadByte()
				if err != nil {
					return bad("truncated")
				}
				if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || f > 3 {
					return bad("an entry that cannot be one")
				}
				rec.ents = append(rec.ents, dirent{name: name, isDir: f&1 != 0, whiteout: f&2 != 0})
			}
			read[rel] = rec
		}
		// Only read is taken from an earlier walk (gitWalk.prev): a
		// walk is whole only with the watches of this process.
		scans[root] = &gitScan{read: read}
	}
	if br.Len() != 0 {
		return bad("data after the records")
	}
	c.mu.Lock()
	c.scans = scans
	c.listedSinceRead = false
	c.mu.Unlock()
	return nil
}
