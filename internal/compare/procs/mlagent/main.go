// Command mlagent is the per-process comparison's hashicorp/memberlist
// agent: one member with memberlist.DefaultLANConfig on the address and port
// it is given, its log discarded as in the in-process comparison (its
// default logs every stream connection at debug level to stderr). See
// package agent for its protocol and ../main.go for the driver that runs
// it.
package main

import (
	"io"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim/internal/compare/procs/agent"
)

func main() {
	agent.Main(func(c agent.Config, live *agent.Live) (agent.Member, error) {
		conf := memberlist.DefaultLANConfig()
		conf.Name = c.Name
		conf.BindAddr = c.Bind
		conf.BindPort = c.Port
		conf.LogOutput = io.Discard
		conf.Events = events{live}
		ml, err := memberlist.Create(conf)
		if err != nil {
			return nil, err
		}
		return member{ml}, nil
	})
}

// events passes memberlist's joins and leaves (dead or left) to the count,
// and its updates (a node's new address or metadata: what memberlist
// reports of a node that came back changed) as restarts.
type events struct{ live *agent.Live }

func (e events) NotifyJoin(n *memberlist.Node)   { e.live.Up(n.Name) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.live.Down(n.Name) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.live.Restarted(n.Name) }

type member struct{ ml *memberlist.Memberlist }

func (m member) Join(seed string) error {
	_, err := m.ml.Join([]string{seed})
	return err
}

func (m member) Shutdown() error { return m.ml.Shutdown() }
