package executor

import (
	"os"
	"sync"
	"unicode/utf8"
)

// Output is one captured stream of a command: the last bytes in memory, and
// the whole stream in a spill file once it outgrew them.
type Output struct {
	// Text is the tail of the stream (all of it when not Truncated). A
	// truncated tail starts at a character boundary.
	Text string `json:"text"`
	// Truncated reports that the stream was longer than the tail kept.
	Truncated bool `json:"truncated"`
	// SpillPath is the file holding the whole stream, or "" when there is
	// none (the stream fit in memory, outgrew the spill cap, or the file
	// could not be created).
	SpillPath string `json:"spillPath,omitempty"`
}

// spillFunc creates the spill file of a stream on its first overflow, and
// returns with it the function that removes it again (through the spill
// directory's descriptor, never by a path the command could have replaced).
type spillFunc func(stream string) (f *os.File, remove func(), err error)

// collector captures one stream: a ring of the last limit bytes, the total
// count, a consuming-read offset, and the spill file. One goroutine writes;
// any goroutine may read.
type collector struct {
	name     string // "stdout" or "stderr"
	limit    int
	spillCap int64
	newSpill spillFunc

	// Owned by the writer goroutine.
	file      *os.File
	remove    func() // removes file
	spillDone bool   // the spill was created and abandoned, or could not be created

	mu    sync.Mutex
	ring  []byte // grows to limit, then wraps at head
	head  int    // next write position once the ring is full
	total int64
	read  int64  // bytes consumed by reads
	path  string // the live spill file, "" when none
	ended bool   // the stream ended: reads hold nothing back
}

func newCollector(name string, limit int, spillCap int64, newSpill spillFunc) *collector {
	return &collector{name: name, limit: limit, spillCap: spillCap, newSpill: newSpill}
}

// Write records p. It never fails: output the tail cannot hold is dropped
// from memory (and kept in the spill file while the spill lives).
func (c *collector) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	before := c.total
	c.mu.Unlock()
	after := before + int64(len(p))

	// The spill file: created on the first overflow with everything so
	// far (still all in the ring), abandoned past the cap.
	var newPath string
	pathChanged := false
	switch {
	case c.file != nil:
		if after > c.spillCap {
			c.abandonSpill()
			pathChanged = true
		} else if _, err := c.file.Write(p); err != nil {
			c.abandonSpill()
			pathChanged = true
		}
	case !c.spillDone && after > int64(c.limit):
		c.spillDone = true
		if after <= c.spillCap && c.newSpill != nil {
			if f, remove, err := c.newSpill(c.name); err == nil {
				c.mu.Lock()
				prefix := c.contents()
				c.mu.Unlock()
				if _, err := f.Write(prefix); err == nil {
					if _, err = f.Write(p); err == nil {
						c.file, c.remove, newPath, pathChanged = f, remove, f.Name(), true
						break
					}
				}
				f.Close()
				remove()
			}
		}
	}

	c.mu.Lock()
	c.append(p)
	c.total = after
	if pathChanged {
		c.path = newPath
	}
	c.mu.Unlock()
	return len(p), nil
}

func (c *collector) abandonSpill() {
	c.file.Close()
	c.remove()
	c.file, c.remove = nil, nil
	c.spillDone = true
}

// close ends the stream and closes the spill file (it stays on disk).
func (c *collector) close() {
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

// append adds p to the ring. c.mu is held.
func (c *collector) append(p []byte) {
	if c.limit <= 0 {
		return
	}
	if len(p) >= c.limit {
		p = p[len(p)-c.limit:]
	}
	if len(c.ring) < c.limit {
		room := c.limit - len(c.ring)
		if len(p) <= room {
			c.ring = append(c.ring, p...)
			return
		}
		c.ring = append(c.ring, p[:room]...)
		p = p[room:]
		c.head = 0
	}
	for len(p) > 0 {
		n := copy(c.ring[c.head:], p)
		p = p[n:]
		c.head = (c.head + n) % c.limit
	}
}

// contents returns the ring's bytes in stream order. c.mu is held.
func (c *collector) contents() []byte {
	if len(c.ring) < c.limit {
		return append([]byte(nil), c.ring...)
	}
	out := make([]byte, 0, c.limit)
	out = append(out, c.ring[c.head:]...)
	return append(out, c.ring[:c.head]...)
}

// output is the stream as a result reports it.
func (c *collector) output() Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.contents()
	truncated := c.total > int64(len(b))
	if truncated {
		b = trimPartialRune(b)
	}
	return Output{Text: string(b), Truncated: truncated, SpillPath: c.path}
}

// consume returns the bytes written since the previous consume, and whether
// some of them had already fallen out of the tail (lossy). While the stream
// lives, a character whose last bytes have not arrived yet is held back for
// the next consume, so that a delta never splits a character; once it ended,
// everything is given.
func (c *collector) consume() (text string, lossy bool, spill string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	unread := c.total - c.read
	if unread == 0 {
		return "", false, c.path
	}
	b := c.contents()
	if unread > int64(len(b)) {
		lossy = true
		b = trimPartialRune(b)
	} else {
		b = b[int64(len(b))-unread:]
	}
	held := 0
	if !c.ended {
		held = incompleteSuffix(b)
	}
	c.read = c.total - int64(held)
	return string(b[:len(b)-held]), lossy, c.path
}

// trimPartialRune drops the continuation bytes of a character cut at the
// start of a tail (at most UTFMax-1 of them; more are not UTF-8, and kept).
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	if len(b) < utf8.UTFMax {
		return b[len(b):] // nothing but the end of a cut character
	}
	return b
}

// incompleteSuffix is the length of the character at the end of b whose
// last bytes are missing (0 when b ends on a whole character, or on bytes
// that are not UTF-8 whatever follows).
func incompleteSuffix(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}
