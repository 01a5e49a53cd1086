package main

import (
	"context"
	"io"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim/internal/compare/harness"
)

// mlLib runs hashicorp/memberlist members over a counting wrapper of
// memberlist's NetTransport.
type mlLib struct{}

func (mlLib) name() string { return "memberlist" }

// memberlistLANDefaults is memberlist.DefaultLANConfig: memberlist runs
// with it in both passes (the matched pass gives its values to swim).
func memberlistLANDefaults() *memberlist.Config { return memberlist.DefaultLANConfig() }

func (mlLib) start(i int, c *harness.Counters, rec *recorder, p plan) (member, error) {
	t, err := harness.OpenMLTransport(c)
	if err != nil {
		return nil, err
	}
	conf := memberlistLANDefaults()
	conf.Name = nodeName(i)
	conf.BindAddr = "127.0.0.1"
	conf.BindPort = 0
	conf.AdvertiseAddr = ""
	conf.Transport = t
	conf.LogOutput = io.Discard
	conf.Events = &mlEvents{rec: rec, self: i}
	if p.encrypted {
		conf.SecretKey = testKey
		conf.Label = testLabel
	}
	ml, err := memberlist.Create(conf)
	if err != nil {
		_ = t.Shutdown()
		return nil, err
	}
	return &mlMember{ml: ml, addr: t.Address()}, nil
}

type mlMember struct {
	ml   *memberlist.Memberlist
	addr string
}

func (m *mlMember) address() string { return m.addr }
func (m *mlMember) numMembers() int { return m.ml.NumMembers() }
func (m *mlMember) shutdown() error { return m.ml.Shutdown() } // no Leave: a crash
func (m *mlMember) dropped() uint64 { return 0 }               // events are delivered synchronously
func (m *mlMember) liveNames() []string {
	ms := m.ml.Members()
	out := make([]string, len(ms))
	for i, mb := range ms {
		out[i] = mb.Name
	}
	return out
}
func (m *mlMember) join(_ context.Context, seed string) error {
	_, err := m.ml.Join([]string{seed})
	return err
}

// mlEvents reports memberlist's NotifyLeave (dead or left) to the recorder.
type mlEvents struct {
	rec  *recorder
	self int
}

func (e *mlEvents) NotifyJoin(*memberlist.Node)    {}
func (e *mlEvents) NotifyUpdate(*memberlist.Node)  {}
func (e *mlEvents) NotifyLeave(n *memberlist.Node) { e.rec.gone(e.self, n.Name) }
