package tasks

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
)

// Options configure a Runtime.
type Options struct {
	// Limit is the most running+stopping tasks one owner may have (the
	// owner "" — tasks started with no agent — is one shared owner for
	// this purpose). Not positive: DefaultLimit (10).
	Limit int
	// Notifier receives completion notices of owned tasks; nil: none.
	Notifier Notifier
}

// Info is a snapshot of one task, for programmatic consumers.
type Info struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Label  string `json:"label"`
	Owner  string `json:"owner,omitempty"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
	// KillReason is the reason given to the task_kill that stopped it.
	KillReason string `json:"killReason,omitempty"`
}

// Runtime holds the background tasks of every session: ids, ownership,
// statuses, the per-owner limit, reads, waits, cancellation, completion
// notices and disposal. It is safe for concurrent use; the zero value is
// not usable, use New.
type Runtime struct {
	limit    int
	notifier Notifier

	mu        sync.Mutex
	tasks     map[string]*task
	byOwner   map[string][]*task
	seq       map[string]int // last number per kind
	reserved  map[string]int // Starts between preflight and registration, per owner
	disposing map[string]int // Disposes in progress, per owner
	closed    bool
	changed   chan struct{} // closed and replaced when a task ends or a reservation is released

	// watchHook, when set (tests only), runs in a task's watcher after its
	// handle is done and before the end is recorded: a test holds the
	// watcher there to order a read before it.
	watchHook func()
}

// task is one background task. Fields below mu are guarded by
// Runtime.mu; readMu serialises reads of the handle.
type task struct {
	id, kind, label, owner string
	n                      int
	h                      Handle
	watched                chan struct{} // closed once the watcher recorded the end and delivered its notice

	readMu sync.Mutex

	status          Status
	detail          string
	ended           bool // the Outcome is recorded
	cancelRequested bool
	killReason      string
	// consumed: the owner already knows of the end (it killed the task, a
	// read or wait reported the final status, it was disposed); no notice.
	consumed bool
	notified bool // the notice was taken (delivered at most once)
	waiters  int  // task_output waits in progress
}

func (t *task) info() Info {
	return Info{ID: t.id, Kind: t.kind, Label: t.label, Owner: t.owner, Status: t.status, Detail: t.detail, KillReason: t.killReason}
}

// New returns an empty Runtime.
func New(o Options) *Runtime {
	limit := o.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Runtime{
		limit:     limit,
		notifier:  o.Notifier,
		tasks:     map[string]*task{},
		byOwner:   map[string][]*task{},
		seq:       map[string]int{},
		reserved:  map[string]int{},
		disposing: map[string]int{},
		changed:   make(chan struct{}),
	}
}

// Limit is the per-owner limit of running+stopping tasks.
func (r *Runtime) Limit() int { return r.limit }

// Start registers a task of kind (its id is "<kind>-<n>", n counting per
// kind from 1) with a display label, owned by owner ("" = no owner: open to
// anyone, and never notified). The per-owner limit is checked and a slot
// reserved before spawn runs, so concurrent Starts never exceed it; spawn
// receives the id and returns the task's Handle. When spawn fails, its
// error is returned as is, no task is recorded and the slot is released;
// the number it was given is not reused (ids are never reused, so whatever
// spawn keyed by the id cannot collide).
//
// Start fails with ErrClosed after Close, and with ErrDisposing while a
// Dispose of the same owner is in progress; a task whose spawn was already
// running when Close or Dispose began is registered and cancelled at once.
func (r *Runtime) Start(owner, kind, label string, spawn func(id string) (Handle, error)) (string, error) {
	if kind == "" {
		return "", errInvalidStart("invalid task kind: expected a non-empty string")
	}
	if spawn == nil {
		return "", errInvalidStart("invalid task start: no spawn function")
	}

	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return "", errClosed()
	case r.disposing[owner] > 0:
		r.mu.Unlock()
		return "", errDisposing()
	case r.liveLocked(owner)+r.reserved[owner] >= r.limit:
		r.mu.Unlock()
		return "", errLimit(r.limit)
	}
	r.reserved[owner]++
	r.seq[kind]++
	n := r.seq[kind]
	id := kind + "-" + strconv.Itoa(n)
	r.mu.Unlock()

	registered := false
	defer func() { // also on a panicking spawn
		if !registered {
			r.mu.Lock()
			r.releaseLocked(owner)
			r.mu.Unlock()
		}
	}()
	h, err := spawn(id)
	if err != nil {
		return "", err
	}
	if h == nil {
		return "", errInvalidStart("invalid task start: spawn returned no handle")
	}

	t := &task{id: id, kind: kind, label: label, owner: owner, n: n, h: h, status: StatusRunning, watched: make(chan struct{})}
	r.mu.Lock()
	r.releaseLocked(owner)
	registered = true
	r.tasks[id] = t
	r.byOwner[owner] = append(r.byOwner[owner], t)
	cancelNow := r.closed || r.disposing[owner] > 0
	if cancelNow {
		t.cancelRequested = true
		t.status = StatusStopping
		t.consumed = true
	}
	r.mu.Unlock()

	go r.watch(t)
	if cancelNow {
		h.Cancel()
	}
	return id, nil
}

// liveLocked counts the owner's running+stopping tasks (a task whose Done
// is closed no longer counts, even before its end is recorded).
func (r *Runtime) liveLocked(owner string) int {
	n := 0
	for _, t := range r.byOwner[owner] {
		if !t.ended && !isDone(t.h) {
			n++
		}
	}
	return n
}

func (r *Runtime) releaseLocked(owner string) {
	if r.reserved[owner]--; r.reserved[owner] <= 0 {
		delete(r.reserved, owner)
	}
	r.broadcastLocked()
}

func (r *Runtime) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// watch records the task's end as soon as its Done is closed and delivers
// its notice, unless the owner already consumed the end.
func (r *Runtime) watch(t *task) {
	defer close(t.watched)
	<-t.h.Done()
	if r.watchHook != nil {
		r.watchHook()
	}
	o := outcomeOf(t.h)
	r.mu.Lock()
	r.endLocked(t, o)
	n := r.takeNoticeLocked(t)
	r.mu.Unlock()
	r.deliver(n)
}

func isDone(h Handle) bool {
	select {
	case <-h.Done():
		return true
	default:
		return false
	}
}

// outcomeOf is the handle's final outcome; one whose status is not final
// is recorded as failed.
func outcomeOf(h Handle) Outcome {
	o := h.Outcome()
	if !o.Status.Ended() {
		detail := o.Detail
		if detail == "" {
			detail = "task ended without a final status (" + strconv.Quote(string(o.Status)) + ")"
		}
		return Outcome{Status: StatusFailed, Detail: detail}
	}
	return o
}

// endLocked records the end (once).
func (r *Runtime) endLocked(t *task, o Outcome) {
	if t.ended {
		return
	}
	t.ended = true
	t.status = o.Status
	t.detail = o.Detail
	r.broadcastLocked()
}

// observe fetches the outcome when the handle is done, outside the lock;
// the caller records it with endLocked.
func observe(t *task) (done bool, o Outcome) {
	if isDone(t.h) {
		return true, outcomeOf(t.h)
	}
	return false, Outcome{}
}

type notice struct {
	owner, text string
}

// takeNoticeLocked decides the notice of an ended task: only for owned
// tasks, with a notifier, not consumed, not already taken, and with no wait
// in progress (a wait that returns the end consumes it; one that does not
// takes the notice when it leaves).
func (r *Runtime) takeNoticeLocked(t *task) *notice {
	if r.notifier == nil || t.owner == "" || !t.ended || t.consumed || t.notified || t.waiters > 0 {
		return nil
	}
	t.notified = true
	return &notice{owner: t.owner, text: noticeText(t.info())}
}

func (r *Runtime) deliver(n *notice) {
	if n != nil {
		r.notifier.Notify(n.owner, n.text)
	}
}

// Get returns a snapshot of the task id (no ownership check: for trusted,
// programmatic consumers).
func (r *Runtime) Get(id string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[id]
	if !ok {
		return Info{}, false
	}
	return t.info(), true
}

// Snapshot returns every task (no ownership check), in id order: by kind,
// then by number.
func (r *Runtime) Snapshot() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.infosLocked(func(*task) bool { return true })
}

func (r *Runtime) infosLocked(keep func(*task) bool) []Info {
	var ts []*task
	for _, t := range r.tasks {
		if keep(t) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *task) int {
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	out := make([]Info, len(ts))
	for i, t := range ts {
		out[i] = t.info()
	}
	return out
}

// Dispose cancels every live task of owner (marking their ends as consumed:
// no notices) and waits until they have ended and no Start of that owner is
// still spawning; new Starts of that owner fail meanwhile. It returns
// ctx's error if ctx ends first (the cancellations stay requested).
func (r *Runtime) Dispose(ctx context.Context, owner string) error {
	r.mu.Lock()
	r.disposing[owner]++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.disposing[owner]--; r.disposing[owner] <= 0 {
			delete(r.disposing, owner)
		}
		r.mu.Unlock()
	}()
	return r.drain(ctx, func(t *task) bool { return t.owner == owner }, func() bool { return r.reserved[owner] > 0 })
}

// Close cancels every live task of every owner (no notices), waits until
// they have ended, and makes later Starts fail with ErrClosed. It returns
// ctx's error if ctx ends first. Close may be called more than once.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return r.drain(ctx, func(*task) bool { return true }, func() bool { return len(r.reserved) > 0 })
}

// drain cancels the live tasks in scope and waits until every task in
// scope has ended and no reservation in scope remains.
func (r *Runtime) drain(ctx context.Context, inScope func(*task) bool, spawning func() bool) error {
	for {
		r.mu.Lock()
		var cancel []Handle
		pending := spawning()
		for _, t := range r.tasks {
			if !inScope(t) || t.ended {
				continue
			}
			pending = true
			t.consumed = true
			if !t.cancelRequested && !isDone(t.h) {
				t.cancelRequested = true
				t.status = StatusStopping
				cancel = append(cancel, t.h)
			}
		}
		changed := r.changed
		r.mu.Unlock()

		for _, h := range cancel {
			h.Cancel()
		}
		if !pending {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
