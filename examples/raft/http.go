package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/raft"
)

// maxValue bounds a written value.
const maxValue = 64 << 10

// applyTimeout bounds how long a write waits for Raft to take it.
const applyTimeout = 5 * time.Second

// Status is what GET /status answers.
type Status struct {
	Name          string         `json:"name"`
	State         string         `json:"state"` // Leader, Follower, Candidate, Shutdown
	LeaderID      string         `json:"leader_id"`
	LeaderAddr    string         `json:"leader_addr"`
	Term          uint64         `json:"term"`
	AppliedIndex  uint64         `json:"applied_index"`
	Keys          int            `json:"keys"`
	Configuration []Server       `json:"configuration"`
	Members       []MemberStatus `json:"members"`
	// EventsDropped counts swim events the supervisor was too far behind
	// to take; each gap makes the reconciler resync from a snapshot.
	EventsDropped uint64 `json:"events_dropped"`
}

// MemberStatus is one swim member in Status.
type MemberStatus struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Raft  string `json:"raft,omitempty"`
}

// handler serves:
//
//	GET /kv/{key}  this node's copy of the key (a follower's may lag)
//	PUT /kv/{key}  a write through Raft: applied by the leader; a follower
//	               answers 307 Temporary Redirect to the leader's front
//	GET /status    this node's Raft state, configuration and swim view
func (n *Node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := n.fsm.Get(r.PathValue("key"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, v)
	})
	mux.HandleFunc("PUT /kv/{key}", n.put)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(n.Status())
	})
	return mux
}

// put applies a write on the leader and redirects it from a follower.
// A redirect rather than a proxy: the client sees which node leads and
// talks to it directly next time, and a follower holds no request open
// on the leader's behalf. Go's client and curl -L follow it with the body.
func (n *Node) put(w http.ResponseWriter, r *http.Request) {
	if n.raft.State() != raft.Leader {
		n.redirect(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxValue+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxValue {
		http.Error(w, "value over 64 KiB", http.StatusRequestEntityTooLarge)
		return
	}
	cmd, _ := json.Marshal(command{Op: "set", Key: r.PathValue("key"), Value: string(body)})
	f := n.raft.Apply(cmd, applyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			n.redirect(w, r)
			return
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if err, ok := f.Response().(error); ok {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// redirect sends the client to the leader's HTTP front, found from the
// leader's Raft ID through its swim metadata; 503 while there is no
// leader or its front is not known yet.
func (n *Node) redirect(w http.ResponseWriter, r *http.Request) {
	_, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.Name {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "no leader", http.StatusServiceUnavailable)
		return
	}
	m, ok := n.ml.Member(string(id))
	var meta Meta
	var err error
	if ok {
		meta, err = DecodeMeta(m.Meta)
	}
	if !ok || err != nil || meta.HTTP == "" {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "leader "+string(id)+" has no known HTTP front", http.StatusServiceUnavailable)
		return
	}
	u := url.URL{Scheme: "http", Host: meta.HTTP, Path: r.URL.Path}
	w.Header().Set("X-Raft-Leader", string(id))
	http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
}

// Status reports the node's Raft state, the configuration as this node
// knows it, and its swim view.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	st := Status{
		Name:          n.cfg.Name,
		State:         n.raft.State().String(),
		LeaderID:      string(id),
		LeaderAddr:    string(addr),
		Term:          n.raft.CurrentTerm(),
		AppliedIndex:  n.raft.AppliedIndex(),
		Keys:          n.fsm.Len(),
		EventsDropped: n.eventsDropped.Load(),
	}
	if servers, err := (raftConfiguration{n.raft}).Servers(); err == nil {
		st.Configuration = servers
	}
	for _, m := range n.ml.Members() {
		ms := MemberStatus{Name: m.Name, State: m.State.String()}
		if meta, err := DecodeMeta(m.Meta); err == nil {
			ms.Raft = meta.Raft
		}
		st.Members = append(st.Members, ms)
	}
	return st
}
