//go:build linux

package chaos

import (
	"encoding/json"
	"io"
	"slices"
	"sync"
	"time"
)

// Line is one event line an agent prints on stdout (see examples/agent).
type Line struct {
	T     int64  `json:"t"` // Unix nanoseconds, the agent's clock
	Ev    string `json:"ev"`
	Node  string `json:"node"`
	Addr  string `json:"addr,omitempty"`
	State string `json:"state,omitempty"`
	Inc   uint64 `json:"inc,omitempty"`
	// Keys (fingerprints, primary first) and Plaintext (the mode) are set
	// on keyring lines only.
	Keys      []string `json:"keys,omitempty"`
	Plaintext string   `json:"plaintext,omitempty"`
	// Signatures (the mode) and Identity (the public key) are set on
	// ready lines of agents that print them.
	Signatures string `json:"signatures,omitempty"`
	Identity   string `json:"identity,omitempty"`
	// Load is set on load lines only (agents run with -load-rate).
	Load *LoadCounts `json:"load,omitempty"`
}

// LoadCounts are an agent's broadcast load so far: the broadcasts it sent,
// those the library refused, and the other agents' broadcasts delivered to
// it.
type LoadCounts struct {
	Sent     uint64 `json:"sent"`
	Failed   uint64 `json:"failed"`
	Received uint64 `json:"received"`
}

// Event is a Line as recorded: who printed it and when it was read.
type Event struct {
	Observer string    // the agent that printed the line
	Arrived  time.Time // when the suite read it
	Line
}

// Time is when the agent printed the event. All agents run on this host,
// so their clocks and the suite's agree.
func (e Event) Time() time.Time { return time.Unix(0, e.T) }

// Views an observer can hold of another member, from its events.
const (
	ViewAlive   = "alive"   // join or alive was its last event about it
	ViewSuspect = "suspect" // suspect
	ViewDead    = "dead"    // leave, state dead
	ViewLeft    = "left"    // leave, state left
)

// EventLog records the events of every agent of a cluster, in the order
// they were read, and keeps each agent's view of the others. It is safe
// for concurrent use: each agent's reader goroutine adds to it while the
// test queries it.
type EventLog struct {
	mu      sync.Mutex
	events  []Event
	views   map[string]map[string]string // observer -> member -> View*
	garbage []string                     // stdout lines that were not events
}

// NewEventLog returns an empty log.
func NewEventLog() *EventLog {
	return &EventLog{views: make(map[string]map[string]string)}
}

// add records one line printed by observer.
func (l *EventLog) add(observer string, raw []byte, arrived time.Time) {
	var line Line
	if err := json.Unmarshal(raw, &line); err != nil || line.Ev == "" {
		l.mu.Lock()
		l.garbage = append(l.garbage, observer+": "+string(raw))
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, Event{Observer: observer, Arrived: arrived, Line: line})
	view := l.views[observer]
	if view == nil {
		view = make(map[string]string)
		l.views[observer] = view
	}
	switch line.Ev {
	case "join", "alive":
		view[line.Node] = ViewAlive
	case "suspect":
		view[line.Node] = ViewSuspect
	case "leave":
		if line.State == "left" {
			view[line.Node] = ViewLeft
		} else {
			view[line.Node] = ViewDead
		}
	}
}

// View returns what observer's events say of member: one of the View*
// constants, or "" when it printed nothing about it.
func (l *EventLog) View(observer, member string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.views[observer][member]
}

// ForgetViews drops what observer's events said of the other members, but
// not the events: a process restarted under observer's name starts with an
// empty view, and its views must come from its own events only.
func (l *EventLog) ForgetViews(observer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.views, observer)
}

// Select returns a copy of the events for which keep returns true, in the
// order they were read.
func (l *EventLog) Select(keep func(Event) bool) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// First returns the first event for which keep returns true.
func (l *EventLog) First(keep func(Event) bool) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if keep(e) {
			return e, true
		}
	}
	return Event{}, false
}

// Len returns how many events were recorded.
func (l *EventLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// WriteJSONL writes every recorded event to w, one JSON object a line:
// the agent's line with "observer" (who printed it) and "arrived" (when the
// suite read it, Unix nanoseconds) added.
func (l *EventLog) WriteJSONL(w io.Writer) error {
	l.mu.Lock()
	events := slices.Clone(l.events)
	l.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, e := range events {
		if err := enc.Encode(struct {
			Observer string `json:"observer"`
			Arrived  int64  `json:"arrived"`
			Line
		}{e.Observer, e.Arrived.UnixNano(), e.Line}); err != nil {
			return err
		}
	}
	return nil
}

// Garbage returns the stdout lines that were not event lines.
func (l *EventLog) Garbage() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.garbage...)
}
