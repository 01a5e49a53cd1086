package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/swim-go/swim"
)

// entry is one key's value and the version that orders writes: the
// writer's clock in nanoseconds, ties broken by the writer's name. The
// write with the greater version wins everywhere (last writer wins), so
// every member that has seen the same writes holds the same map, whatever
// order they arrived in.
type entry struct {
	Key     string `json:"k"`
	Value   string `json:"v"`
	Version int64  `json:"t"`
	Writer  string `json:"w"`
}

func (e entry) newerThan(o entry) bool {
	if e.Version != o.Version {
		return e.Version > o.Version
	}
	return e.Writer > o.Writer
}

// Store is a replicated last-writer-wins map over a swim cluster, built
// the way dskit's memberlist KV is: each write spreads as a keyed
// broadcast (a newer write of a key replaces the older one in every
// queue), and the whole map travels with every push-pull through the state
// delegate, which brings a member that was away, or joined late, up to
// date. Between members of this release the broadcasts travel on swim's
// broadcast trees, which reach every live member with every write, at
// rates gossip cannot carry: the push-pull is only the catch-up.
//
// Give it to swim as Config.Messages and Config.State, then call Attach
// with the running Memberlist.
type Store struct {
	name string

	mu      sync.Mutex
	entries map[string]entry
	last    int64 // the greatest version seen, so this member's writes order after it
	ml      *swim.Memberlist
}

// NewStore returns an empty store for the member called name.
func NewStore(name string) *Store {
	return &Store{name: name, entries: make(map[string]entry)}
}

// Attach gives the store the member its writes go out through.
func (s *Store) Attach(ml *swim.Memberlist) {
	s.mu.Lock()
	s.ml = ml
	s.mu.Unlock()
}

// Put writes key and spreads the write. While this member's broadcast
// links are backed up it waits for room, until ctx is done.
func (s *Store) Put(ctx context.Context, key, value string) error {
	s.mu.Lock()
	version := max(time.Now().UnixNano(), s.last+1)
	e := entry{Key: key, Value: value, Version: version, Writer: s.name}
	s.applyLocked(e)
	ml := s.ml
	s.mu.Unlock()
	if ml == nil {
		return fmt.Errorf("kv: store not attached to a member")
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = ml.BroadcastWait(ctx, data, key)
	return err
}

// Get returns key's value.
func (s *Store) Get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	return e.Value, ok
}

// Snapshot returns the map.
func (s *Store) Snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.entries))
	for k, e := range s.entries {
		out[k] = e.Value
	}
	return out
}

// applyLocked keeps e if it is newer than what the store holds.
func (s *Store) applyLocked(e entry) {
	s.last = max(s.last, e.Version)
	if cur, ok := s.entries[e.Key]; ok && !e.newerThan(cur) {
		return
	}
	s.entries[e.Key] = e
}

// HandleMessage applies a write another member broadcast (swim.MessageHandler).
func (s *Store) HandleMessage(m swim.Message) {
	if m.Kind != swim.MessageBroadcast {
		return
	}
	var e entry
	if err := json.Unmarshal(m.Payload, &e); err != nil || e.Key == "" {
		return // not ours: a store ignores what it cannot read
	}
	s.mu.Lock()
	s.applyLocked(e)
	s.mu.Unlock()
}

// LocalState returns the whole map, for a push-pull (swim.StateDelegate).
func (s *Store) LocalState(join bool) []byte {
	s.mu.Lock()
	all := make([]entry, 0, len(s.entries))
	for _, e := range s.entries {
		all = append(all, e)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Key < all[j].Key })
	data, _ := json.Marshal(all) // entries of strings always encode
	return data
}

// MergeRemoteState merges a peer's map into this one, key by key
// (swim.StateDelegate).
func (s *Store) MergeRemoteState(state []byte, join bool) error {
	var all []entry
	if err := json.Unmarshal(state, &all); err != nil {
		return fmt.Errorf("kv: peer state: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range all {
		if e.Key != "" {
			s.applyLocked(e)
		}
	}
	return nil
}
