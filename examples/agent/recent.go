package main

import (
	"sync"
	"time"

	"github.com/swim-go/swim"
)

// recentLimit is how many events the agent keeps for /events and the page:
// enough to see a failure and its suspicion, a few joins and leaves.
const recentLimit = 100

// eventView is one membership event as /events reports it.
type eventView struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Kind        string    `json:"kind"`
	Node        string    `json:"node"`
	Addr        string    `json:"addr,omitempty"`
	State       string    `json:"state"`
	Incarnation uint64    `json:"incarnation"`
}

// recentEvents keeps the last recentLimit events the member delivered.
// The handler adds from the Memberlist's dispatcher; HTTP handlers read.
type recentEvents struct {
	mu     sync.Mutex
	events []eventView // oldest first
}

func (r *recentEvents) add(e swim.Event) {
	v := eventView{
		Seq: e.Seq, Time: e.Time, Kind: e.Kind.String(), Node: e.Member.Name,
		State: e.Member.State.String(), Incarnation: e.Member.Incarnation,
	}
	if e.Member.Addr.IsValid() {
		v.Addr = e.Member.Addr.String()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == recentLimit {
		copy(r.events, r.events[1:])
		r.events = r.events[:recentLimit-1]
	}
	r.events = append(r.events, v)
}

// after returns the kept events with a Seq above seq, oldest first, and
// the Seq of the last event kept (0 before the first).
func (r *recentEvents) after(seq uint64) ([]eventView, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []eventView{}
	for _, e := range r.events {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	var last uint64
	if n := len(r.events); n > 0 {
		last = r.events[n-1].Seq
	}
	return out, last
}
