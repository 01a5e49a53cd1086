package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func set(t *testing.T, f *FSM, index uint64, key, value string) any {
	t.Helper()
	data, err := json.Marshal(command{Op: "set", Key: key, Value: value})
	require.NoError(t, err)
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
}

// sink is a SnapshotSink in memory.
type sink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Close() error  { s.closed = true; return nil }
func (s *sink) Cancel() error { s.cancelled = true; return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	f := NewFSM()
	assert.Nil(t, set(t, f, 1, "a", "1"))
	assert.Nil(t, set(t, f, 2, "b", "2"))
	assert.Nil(t, set(t, f, 3, "a", "3"))
	snap, err := f.Snapshot()
	require.NoError(t, err)
	// A write after the snapshot is not in it.
	assert.Nil(t, set(t, f, 4, "c", "4"))

	var s sink
	require.NoError(t, snap.Persist(&s))
	snap.Release()
	assert.True(t, s.closed)

	g := NewFSM()
	require.NoError(t, g.Restore(io.NopCloser(&s)))
	v, ok := g.Get("a")
	assert.True(t, ok)
	assert.Equal(t, "3", v)
	_, ok = g.Get("c")
	assert.False(t, ok)
	assert.Equal(t, 2, g.Len())
}

func TestFSMRefusesBadEntries(t *testing.T) {
	f := NewFSM()
	assert.Error(t, f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: []byte("{")}).(error))
	data, _ := json.Marshal(command{Op: "drop", Key: "a"})
	assert.ErrorContains(t, f.Apply(&raft.Log{Index: 8, Type: raft.LogCommand, Data: data}).(error), `unknown op "drop"`)
	// Entries that are not commands (configuration changes, no-ops) are
	// Raft's own.
	assert.Nil(t, f.Apply(&raft.Log{Index: 9, Type: raft.LogConfiguration, Data: []byte("x")}))
	assert.Zero(t, f.Len())
	assert.Error(t, f.Restore(io.NopCloser(bytes.NewReader([]byte("not json")))))
}

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{Raft: "127.0.0.1:8300", HTTP: "127.0.0.1:8000", Voter: true, Leader: true}
	b, err := m.Encode()
	require.NoError(t, err)
	got, err := DecodeMeta(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	_, err = DecodeMeta(nil)
	assert.Error(t, err)
	_, err = DecodeMeta([]byte(`{"raft":"no-port"}`))
	assert.ErrorContains(t, err, "raft address")
	_, err = Meta{}.Encode()
	assert.Error(t, err)
}
