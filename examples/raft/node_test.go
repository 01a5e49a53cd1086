package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/swim-go/swim"
)

var verbose = flag.Bool("raft.verbose", false, "log the nodes' info lines (reconciler changes) and Raft's warnings")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The integration test's settings: swim's Local profile (a crash is
// declared dead about PauseTolerance, 2 s, after it) and Raft timeouts
// short enough for one machine.
const (
	testGrace     = 3 * time.Second
	testDeadline  = 30 * time.Second
	pollEvery     = 20 * time.Millisecond
	monitorPeriod = 25 * time.Millisecond
)

func testRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 400 * time.Millisecond
	c.ElectionTimeout = 400 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 20 * time.Millisecond
	return c
}

// cluster runs nodes in this process, each on its own sockets of
// 127.0.0.1 and its own data directory, and keeps the Raft address each
// got so that a restart reuses it.
type cluster struct {
	t      *testing.T
	dir    string
	client *http.Client

	mu       sync.Mutex
	nodes    map[string]*Node // running
	raftAddr map[string]string
	seed     string
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{
		t:        t,
		dir:      t.TempDir(),
		client:   &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}},
		nodes:    make(map[string]*Node),
		raftAddr: make(map[string]string),
	}
	t.Cleanup(func() {
		c.mu.Lock()
		nodes := c.nodes
		c.nodes = nil
		c.mu.Unlock()
		for _, n := range nodes {
			_ = n.Close()
		}
		c.client.CloseIdleConnections()
	})
	return c
}

func (c *cluster) start(name string, bootstrap bool) *Node {
	c.t.Helper()
	c.mu.Lock()
	addr, seed := c.raftAddr[name], c.seed
	c.mu.Unlock()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var join []string
	if seed != "" {
		join = []string{seed}
	}
	level, raftLog := zap.WarnLevel, io.Writer(nil)
	if *verbose {
		level, raftLog = zap.InfoLevel, os.Stderr
	}
	n, err := StartNode(NodeConfig{
		Name:              name,
		SwimAddr:          "127.0.0.1",
		RaftAddr:          addr,
		HTTPAddr:          "127.0.0.1:0",
		DataDir:           filepath.Join(c.dir, name),
		Join:              join,
		Bootstrap:         bootstrap,
		DeadGrace:         testGrace,
		ReconcileInterval: time.Second,
		RaftIOTimeout:     2 * time.Second,
		Swim:              swim.DefaultLocalConfig(),
		Raft:              testRaftConfig(),
		Logger:            zaptest.NewLogger(c.t, zaptest.Level(level)),
		RaftLog:           raftLog,
	})
	require.NoError(c.t, err, "start %s", name)
	c.mu.Lock()
	c.nodes[name] = n
	c.raftAddr[name] = n.meta.Raft
	if c.seed == "" {
		c.seed = n.ml.LocalMember().Addr.String()
	}
	c.mu.Unlock()
	return n
}

// stop takes a node out: abruptly (no leave: to the others it crashed) or
// gracefully.
func (c *cluster) stop(name string, graceful bool) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[name]
	delete(c.nodes, name)
	if c.seed == n.ml.LocalMember().Addr.String() {
		c.seed = ""
		for _, other := range c.nodes {
			c.seed = other.ml.LocalMember().Addr.String()
			break
		}
	}
	c.mu.Unlock()
	if graceful {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(c.t, n.Leave(ctx))
	} else {
		require.NoError(c.t, n.Close())
	}
}

func (c *cluster) running() map[string]*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*Node, len(c.nodes))
	for k, v := range c.nodes {
		out[k] = v
	}
	return out
}

// status asks a node's HTTP front.
func (c *cluster) status(n *Node) (Status, error) {
	resp, err := c.client.Get("http://" + n.meta.HTTP + "/status")
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	var st Status
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader is the running node that says it leads, with its status.
func (c *cluster) leader() (string, Status, bool) {
	for name, n := range c.running() {
		st, err := c.status(n)
		if err == nil && st.State == "Leader" {
			return name, st, true
		}
	}
	return "", Status{}, false
}

func voterIDs(st Status) []string {
	var ids []string
	for _, s := range st.Configuration {
		if s.Voter {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", testDeadline, what)
		}
		<-tick.C
	}
}

// waitForVoters waits until the leader's configuration has exactly these
// voters, and returns the leader's name.
func (c *cluster) waitForVoters(t *testing.T, want ...string) string {
	t.Helper()
	slices.Sort(want)
	var leader string
	waitFor(t, "voters "+strings.Join(want, ","), func() bool {
		name, st, ok := c.leader()
		leader = name
		return ok && slices.Equal(voterIDs(st), want)
	})
	return leader
}

// put writes through any node's front, following its redirect to the
// leader.
func (c *cluster) put(n *Node, key, value string) error {
	req, err := http.NewRequest(http.MethodPut, "http://"+n.meta.HTTP+"/kv/"+key, strings.NewReader(value))
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PUT %s on %s: %s %s", key, n.cfg.Name, resp.Status, body)
	}
	return nil
}

// mustPut writes, retrying while the cluster has no leader (an election
// in progress), and waits until every running node has applied it.
func (c *cluster) mustPut(t *testing.T, via, key, value string) {
	t.Helper()
	var err error
	waitFor(t, "write "+key, func() bool {
		n := c.running()[via]
		err = c.put(n, key, value)
		return err == nil
	})
	waitFor(t, "every node to apply "+key, func() bool {
		for _, n := range c.running() {
			if v, ok := n.fsm.Get(key); !ok || v != value {
				return false
			}
		}
		return true
	})
}

// monitor checks, every monitorPeriod until stopped, that the leader's
// configuration never has fewer running voters than its quorum: the
// reconciler's removals never cost the cluster its majority.
type monitor struct {
	stop chan struct{}
	done chan struct{}

	mu         sync.Mutex
	violations []string
	checks     int
}

func (c *cluster) monitor() *monitor {
	m := &monitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(monitorPeriod)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			nodes := c.running()
			for name, n := range nodes {
				st := n.Status()
				if st.State != "Leader" {
					continue
				}
				voters, up := 0, 0
				for _, s := range st.Configuration {
					if s.Voter {
						voters++
						if _, ok := nodes[s.ID]; ok {
							up++
						}
					}
				}
				m.mu.Lock()
				m.checks++
				if up < quorum(voters) {
					m.violations = append(m.violations,
						fmt.Sprintf("leader %s: %d of %d voters running (%v)", name, up, voters, voterIDs(st)))
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *monitor) finish(t *testing.T) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Empty(t, m.violations, "quorum lost")
	assert.Positive(t, m.checks, "the monitor saw a leader")
	t.Logf("quorum monitor: %d checks of the leader's configuration, no violation", m.checks)
}

// whenDead waits until the named node sees member dead in swim, and
// returns when that was first observed.
func whenDead(t *testing.T, n *Node, member string) time.Time {
	t.Helper()
	waitFor(t, n.cfg.Name+" to see "+member+" dead", func() bool {
		m, ok := n.ml.Member(member)
		return !ok || m.State == swim.StateDead
	})
	return time.Now()
}

func TestClusterFollowsSwim(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five Raft servers for about 20 seconds")
	}
	c := newCluster(t)
	began := time.Now()

	// Five nodes: n1 bootstraps, the others join through swim and the
	// reconciler adds them.
	c.start("n1", true)
	for _, name := range []string{"n2", "n3", "n4", "n5"} {
		c.start(name, false)
	}
	leader := c.waitForVoters(t, "n1", "n2", "n3", "n4", "n5")
	require.Equal(t, "n1", leader, "the bootstrapped node leads: nobody else has a log")
	t.Logf("5 voters %v after start", time.Since(began).Round(time.Millisecond))
	mon := c.monitor()

	// A write on a follower is redirected to the leader and reaches all.
	c.mustPut(t, "n3", "a", "1")

	// n5 crashes: removed once swim declared it dead and the grace passed;
	// writes go on meanwhile.
	c.stop("n5", false)
	stopped := time.Now()
	c.mustPut(t, "n2", "b", "2")
	dead := whenDead(t, c.running()["n1"], "n5")
	c.waitForVoters(t, "n1", "n2", "n3", "n4")
	removed := time.Since(stopped)
	t.Logf("abrupt stop of a follower: swim dead after %v, removed from the configuration after %v (grace %v)",
		dead.Sub(stopped).Round(time.Millisecond), removed.Round(time.Millisecond), testGrace)
	assert.GreaterOrEqual(t, removed, testGrace, "removed before the grace ended")
	c.mustPut(t, "n4", "c", "3")

	// n4 leaves gracefully: removed at once, well within a grace.
	c.stop("n4", true)
	left := time.Now()
	c.waitForVoters(t, "n1", "n2", "n3")
	leftRemoved := time.Since(left)
	t.Logf("graceful leave: removed from the configuration after %v", leftRemoved.Round(time.Millisecond))
	assert.Less(t, leftRemoved, testGrace, "a leave waited for the grace")

	// n5 restarts on its data directory: added back, and it catches up
	// on what was written while it was away.
	c.start("n5", false)
	restarted := time.Now()
	c.waitForVoters(t, "n1", "n2", "n3", "n5")
	t.Logf("restart: back in the configuration after %v", time.Since(restarted).Round(time.Millisecond))
	waitFor(t, "n5 to catch up", func() bool {
		v, ok := c.running()["n5"].fsm.Get("c")
		return ok && v == "3"
	})

	// n3 crashes and is back after swim declared it dead but within the
	// grace: it keeps its vote, the configuration never drops it.
	c.stop("n3", false)
	dead = whenDead(t, c.running()["n1"], "n3")
	c.start("n3", false)
	waitFor(t, "n1 to see n3 alive again", func() bool {
		m, ok := c.running()["n1"].ml.Member("n3")
		return ok && m.State == swim.StateAlive
	})
	back := time.Since(dead)
	require.Less(t, back, testGrace, "n3 came back too late for this check")
	keptUntil := dead.Add(testGrace + time.Second)
	waitFor(t, "the grace to pass with n3 kept", func() bool {
		_, st, ok := c.leader()
		if ok {
			require.Contains(t, voterIDs(st), "n3", "n3 removed although it came back within the grace")
		}
		return time.Now().After(keptUntil)
	})
	t.Logf("restart within the grace: back alive %v after the dead verdict, kept its vote", back.Round(time.Millisecond))
	c.mustPut(t, "n3", "f", "6")

	// The leader crashes: three of four voters remain, a quorum; one of
	// them is elected, reconciles the whole configuration, and removes
	// n1 after the grace.
	c.stop("n1", false)
	crashed := time.Now()
	var newLeader string
	waitFor(t, "a new leader", func() bool {
		name, _, ok := c.leader()
		newLeader = name
		return ok
	})
	elected := time.Since(crashed)
	c.mustPut(t, "n2", "d", "4")
	c.waitForVoters(t, "n2", "n3", "n5")
	t.Logf("leader crash: %s elected after %v, old leader removed after %v",
		newLeader, elected.Round(time.Millisecond), time.Since(crashed).Round(time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(crashed), testGrace)
	c.mustPut(t, "n3", "e", "5")

	mon.finish(t)
	for name, n := range c.running() {
		for key, want := range map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"} {
			v, ok := n.fsm.Get(key)
			assert.True(t, ok && v == want, "%s: %s = %q, want %q", name, key, v, want)
		}
	}
	t.Logf("whole scenario: %v", time.Since(began).Round(time.Millisecond))
}

// A restart keeps the data directory's state: the log survives in raft.db.
func TestNodeRestartKeepsState(t *testing.T) {
	c := newCluster(t)
	c.start("n1", true)
	c.waitForVoters(t, "n1")
	c.mustPut(t, "n1", "k", "v")
	c.stop("n1", false)
	_, err := os.Stat(filepath.Join(c.dir, "n1", "raft.db"))
	require.NoError(t, err)

	// Bootstrap again is ignored: the node has state, and leads again
	// with its key.
	n := c.start("n1", true)
	c.waitForVoters(t, "n1")
	waitFor(t, "the key replayed", func() bool {
		v, ok := n.fsm.Get("k")
		return ok && v == "v"
	})
}
