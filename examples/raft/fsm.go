package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/hashicorp/raft"
)

// command is one write, as it travels in the Raft log.
type command struct {
	Op    string `json:"op"` // "set"
	Key   string `json:"key"`
	Value string `json:"value"`
}

// FSM is the replicated state: a map of strings that every node builds by
// applying the same log in the same order.
type FSM struct {
	mu   sync.RWMutex
	data map[string]string
}

// NewFSM returns an empty store.
func NewFSM() *FSM { return &FSM{data: make(map[string]string)} }

// Get reads a key from this node's copy, which a follower may hold a few
// entries behind the leader.
func (f *FSM) Get(key string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.data[key]
	return v, ok
}

// Len counts the keys.
func (f *FSM) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.data)
}

// Apply applies one committed entry; the error it returns for an entry it
// cannot read reaches the writer through ApplyFuture.Response.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var c command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("log entry %d: %w", l.Index, err)
	}
	switch c.Op {
	case "set":
		f.mu.Lock()
		f.data[c.Key] = c.Value
		f.mu.Unlock()
		return nil
	}
	return fmt.Errorf("log entry %d: unknown op %q", l.Index, c.Op)
}

// Snapshot copies the map; Raft persists the copy while writes go on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return fsmSnapshot(maps.Clone(f.data)), nil
}

// Restore replaces the map with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data := make(map[string]string)
	if err := json.NewDecoder(rc).Decode(&data); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.data = data
	f.mu.Unlock()
	return nil
}

type fsmSnapshot map[string]string

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(map[string]string(s)); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
