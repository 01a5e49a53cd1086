package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
)

// Meta is what each node publishes in its swim metadata: how the leader's
// reconciler adds it to the Raft configuration, and how a follower finds
// the leader's HTTP front.
type Meta struct {
	// Raft is the node's Raft transport address (host:port), the address
	// the leader puts in the configuration.
	Raft string `json:"raft"`
	// HTTP is the address of the node's HTTP front, where a follower
	// redirects writes while this node leads.
	HTTP string `json:"http,omitempty"`
	// Voter says whether the node wants a vote (AddVoter) or only a copy
	// of the log (AddNonvoter).
	Voter bool `json:"voter"`
	// Leader is true while the node leads, for operators reading the
	// member list; the reconciler never relies on it (Raft knows its
	// leader).
	Leader bool `json:"leader,omitempty"`
}

// Encode returns the metadata as swim carries it.
func (m Meta) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// DecodeMeta parses a member's metadata. A member without metadata, or
// with metadata of another program, is an error: the reconciler leaves
// such a member out of the Raft configuration.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) == 0 {
		return Meta{}, errors.New("no metadata")
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("metadata: %w", err)
	}
	if err := m.validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

func (m Meta) validate() error {
	if _, _, err := net.SplitHostPort(m.Raft); err != nil {
		return fmt.Errorf("metadata: raft address %q: %w", m.Raft, err)
	}
	return nil
}
