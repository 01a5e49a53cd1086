package migrate

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
)

// The one view: a peer is live while either side holds it alive or
// suspect, alive if either holds it alive; its address and metadata are
// swim's while swim holds it live, memberlist's otherwise. An event is
// emitted when the one view changes, not when one side does: a peer that
// leaves memberlist as it leaves migration mode, but stays on swim, is no
// event.

// live reports whether a swim state is alive or suspect.
func live(st swim.State) bool { return st == swim.StateAlive || st == swim.StateSuspect }

func mlLive(st memberlist.NodeStateType) bool {
	return st == memberlist.StateAlive || st == memberlist.StateSuspect
}

// merged is the one view of name (b.mu held), and whether it is live.
func (b *Bridge) merged(name string) (swim.Member, bool) {
	sm, sok := b.sw.Member(name)
	sLive := sok && live(sm.State)
	mn, mok := b.mlNodes[name]
	mLive := mok && mlLive(mn.State)
	if !sLive && !mLive {
		m := swim.Member{Name: name, State: swim.StateDead}
		if sok && sm.State == swim.StateLeft || mok && mn.State == memberlist.StateLeft {
			m.State = swim.StateLeft
		}
		return m, false
	}
	m := sm
	if !sLive {
		m = swim.Member{Name: name, Addr: mlAddr(&mn), Meta: bytes.Clone(mn.Meta)}
	}
	m.State = swim.StateSuspect
	if sok && sm.State == swim.StateAlive || mok && mn.State == memberlist.StateAlive {
		m.State = swim.StateAlive
	}
	return m, true
}

// refresh brings the one view of name up to date (b.mu held) and queues
// the event its change makes.
func (b *Bridge) refresh(name string) {
	if name == b.name {
		return
	}
	old, was := b.view[name]
	cur, isLive := b.merged(name)
	switch {
	case isLive && !was:
		b.view[name] = cur
		b.events.push(swim.Event{Kind: swim.EventJoin, Member: cur})
	case !isLive && was:
		delete(b.view, name)
		b.events.push(swim.Event{Kind: swim.EventLeave, Member: cur})
	case isLive:
		b.view[name] = cur
		if old.Addr != cur.Addr || !bytes.Equal(old.Meta, cur.Meta) {
			b.events.push(swim.Event{Kind: swim.EventUpdate, Member: cur})
		}
		switch {
		case old.State == swim.StateAlive && cur.State == swim.StateSuspect:
			b.events.push(swim.Event{Kind: swim.EventSuspect, Member: cur})
		case old.State == swim.StateSuspect && cur.State == swim.StateAlive:
			b.events.push(swim.Event{Kind: swim.EventAlive, Member: cur})
		}
	}
}

// Members returns the one view's live members, this process first, then
// by name.
func (b *Bridge) Members() []swim.Member {
	self := b.sw.LocalMember()
	b.mu.Lock()
	out := make([]swim.Member, 0, len(b.view)+1)
	for _, m := range b.view {
		m.Meta = bytes.Clone(m.Meta)
		out = append(out, m)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y swim.Member) int { return strings.Compare(x.Name, y.Name) })
	return append([]swim.Member{self}, out...)
}

// NumMembers counts the one view's live members, this process included.
func (b *Bridge) NumMembers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.view) + 1
}

// swimEvent takes an event of the swim side.
func (b *Bridge) swimEvent(e swim.Event) {
	b.mu.Lock()
	b.refresh(e.Member.Name)
	b.mu.Unlock()
}

// mlEvents takes the memberlist side's events. memberlist calls them with
// its own locks held: they only record and queue.
type mlEvents Bridge

// note records n in state st: memberlist tells a node's state by which
// callback it calls (its Node.State is not kept current), and reports no
// suspicion.
func (e *mlEvents) note(n *memberlist.Node, st memberlist.NodeStateType) {
	b := (*Bridge)(e)
	if n.Name == b.name {
		return
	}
	c := *n
	c.State = st
	c.Addr = slices.Clone(n.Addr)
	c.Meta = bytes.Clone(n.Meta)
	b.mu.Lock()
	if b.ml == nil {
		b.mu.Unlock()
		return
	}
	b.mlNodes[n.Name] = c
	b.countNodes()
	b.refresh(n.Name)
	b.mu.Unlock()
}

func (e *mlEvents) NotifyJoin(n *memberlist.Node) {
	e.note(n, memberlist.StateAlive)
	if n.Name != e.name {
		(*Bridge)(e).findSwim(n)
	}
}

func (e *mlEvents) NotifyLeave(n *memberlist.Node) {
	st := memberlist.StateDead
	if n.State == memberlist.StateLeft {
		st = memberlist.StateLeft
	}
	e.note(n, st)
	// Whatever runs under the name next is tried afresh: a process
	// rolled back to memberlist alone may follow a bridged one at once.
	e.mu.Lock()
	delete(e.tried, n.Name)
	delete(e.noSwim, n.Name)
	e.mu.Unlock()
}

func (e *mlEvents) NotifyUpdate(n *memberlist.Node) { e.note(n, memberlist.StateAlive) }

// eventQueue hands the one view's events to the application's handler on
// a goroutine of its own, in order, past which they are dropped (limit).
type eventQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	q       []swim.Event
	limit   int
	closed  bool
	h       swim.EventHandler
	done    chan struct{}
	dropped atomic.Uint64
}

func newEventQueue(limit int, h swim.EventHandler) *eventQueue {
	q := &eventQueue{limit: limit, h: h, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.run()
	return q
}

func (q *eventQueue) push(e swim.Event) {
	if q.h == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.q) >= q.limit {
		q.dropped.Add(1)
		return
	}
	q.q = append(q.q, e)
	q.cond.Signal()
}

func (q *eventQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.q) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.q) == 0 {
			q.mu.Unlock()
			return
		}
		e := q.q[0]
		q.q = q.q[1:]
		q.mu.Unlock()
		q.h.HandleEvent(e)
	}
}

// close delivers what is queued, then ends the goroutine.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Signal()
	q.mu.Unlock()
	<-q.done
}
