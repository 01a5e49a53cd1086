package main

import (
	"context"
	"reflect"
	"unsafe"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/compare/harness"
)

// swimLib runs swim members over a counting wrapper of swim's NetTransport.
type swimLib struct{}

func (swimLib) name() string { return "swim" }

// swimConfig returns the configuration of member i: swim's LAN defaults, or,
// matched, memberlist's LAN values for the knobs both libraries have (see
// matchedNote).
func swimConfig(matched bool) *swim.Config {
	cfg := swim.DefaultLANConfig()
	if matched {
		ml := memberlistLANDefaults()
		cfg.ProbeInterval = ml.ProbeInterval
		cfg.ProbeTimeout = ml.ProbeTimeout
		cfg.IndirectChecks = ml.IndirectChecks
		cfg.SuspicionMult = ml.SuspicionMult
		cfg.SuspicionMaxTimeoutMult = ml.SuspicionMaxTimeoutMult
		cfg.RetransmitMult = ml.RetransmitMult
		cfg.GossipInterval = ml.GossipInterval
		cfg.GossipNodes = ml.GossipNodes
		cfg.GossipToDeadTime = ml.GossipToTheDeadTime
		cfg.PushPullInterval = ml.PushPullInterval
		cfg.StreamTimeout = ml.TCPTimeout
		cfg.PacketBudget = ml.UDPBufferSize
		cfg.AwarenessMaxMultiplier = ml.AwarenessMaxMultiplier
		cfg.Detection.TCPChecks = !ml.DisableTcpPings
		// memberlist has no pause tolerance: its suspicion timeout is
		// SuspicionMult·max(1, log10 N)·ProbeInterval (Max = 6×), which
		// swim uses too when PauseTolerance is 0.
		cfg.PauseTolerance = 0
	}
	return cfg
}

func (swimLib) start(i int, c *harness.Counters, rec *recorder, p plan) (member, error) {
	cfg := swimConfig(p.matched)
	if swimRetransmitMult > 0 {
		cfg.RetransmitMult = swimRetransmitMult
	}
	if swimGossipNodes > 0 {
		cfg.GossipNodes = swimGossipNodes
	}
	if p.encrypted {
		cfg.Security.Keys = [][]byte{testKey}
		cfg.Label = testLabel
	}
	t, err := harness.NewSwimTransport(c, cfg.MaxConcurrentStreams)
	if err != nil {
		return nil, err
	}
	cfg.Name = nodeName(i)
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Transport = t
	if !swimDirect {
		cfg.Transport = channelOnly{t}
	}
	cfg.Events = swim.EventFunc(func(e swim.Event) {
		if e.Kind == swim.EventLeave {
			rec.gone(i, e.Member.Name)
		}
	})
	ml, err := swim.New(cfg)
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	return &swimMember{ml: ml, addr: t.LocalAddr().String()}, nil
}

type swimMember struct {
	ml   *swim.Memberlist
	addr string
}

func (m *swimMember) address() string { return m.addr }
func (m *swimMember) numMembers() int { return m.ml.NumMembers() }
func (m *swimMember) shutdown() error { return m.ml.Shutdown() }
func (m *swimMember) dropped() uint64 { return m.ml.Stats().EventsDropped }
func (m *swimMember) liveNames() []string {
	ms := m.ml.Members()
	out := make([]string, len(ms))
	for i, mb := range ms {
		out[i] = mb.Name
	}
	return out
}
func (m *swimMember) join(ctx context.Context, seed string) error {
	_, err := m.ml.Join(ctx, seed)
	return err
}

// swimDirect (-swim-direct) lets swim handle packets on the transport's
// reader goroutine (PacketHandlerTransport); off, packets reach its loop
// through the Packets channel, for comparing the two.
var swimDirect = true

// swimRetransmitMult (-swim-retransmit-mult) and swimGossipNodes
// (-swim-gossip-nodes), when set, replace swim's RetransmitMult and
// GossipNodes, for measuring what the redundancy and the rate of gossip
// cost a join storm.
var swimRetransmitMult, swimGossipNodes int

// channelOnly hides HandlePackets from swim.
type channelOnly struct{ swim.Transport }

// swimEventBuffer and swimEventSize size the event queue swim keeps when
// Config.Events is set, for the notes under the table.
func swimEventBuffer() int { return swim.DefaultLANConfig().EventBuffer }
func swimEventSize() int   { return int(unsafe.Sizeof(swim.Event{})) }

// counters returns swim's cumulative counters of the member by name (the
// uint64 fields of MemberlistStats), for -stats.
func (m *swimMember) counters() map[string]uint64 {
	st := m.ml.Stats()
	out := map[string]uint64{}
	addUintFields(out, reflect.ValueOf(st))
	return out
}

// addUintFields adds the uint64 fields of the struct v, and of the structs
// it embeds, to out by name.
func addUintFields(out map[string]uint64, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		switch {
		case t.Field(i).Anonymous && f.Kind() == reflect.Struct:
			addUintFields(out, f)
		case f.Kind() == reflect.Uint64:
			out[t.Field(i).Name] += f.Uint()
		}
	}
}
