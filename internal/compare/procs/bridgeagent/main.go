// Command bridgeagent is the per-process comparison's agent in migration
// mode: one process a member of a hashicorp/memberlist cluster
// (memberlist.DefaultLANConfig, on the port it is given) and of a swim
// cluster (swim.DefaultLANConfig, on that port plus swimOffset) at once,
// through package migrate's Bridge, which joins the swim side of every
// bridged peer it finds on memberlist. Its view is the Bridge's one view.
// See package agent for its protocol and ../main.go for the driver.
package main

import (
	"context"
	"io"
	"log"

	"github.com/hashicorp/memberlist"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/compare/procs/agent"
	"github.com/swim-go/swim/migrate"
)

// swimOffset is the swim port's distance from the memberlist port: half
// the driver's span of ports per library, which holds -n agents.
const swimOffset = 500

func main() {
	agent.Main(func(c agent.Config, live *agent.Live) (agent.Member, error) {
		mc := memberlist.DefaultLANConfig()
		mc.Name = c.Name
		mc.BindAddr = c.Bind
		mc.BindPort = c.Port
		mc.AdvertiseAddr = c.Bind
		mc.AdvertisePort = c.Port
		mc.Logger = log.New(io.Discard, "", 0)
		sc := swim.DefaultLANConfig()
		sc.Name = c.Name
		sc.BindAddr = c.Bind
		sc.BindPort = c.Port + swimOffset
		b, err := migrate.New(migrate.Config{
			Memberlist: mc, Swim: sc, SwimPortOffset: swimOffset,
			Events: swim.EventFunc(func(e swim.Event) {
				switch e.Kind {
				case swim.EventJoin:
					live.Up(e.Member.Name)
				case swim.EventLeave:
					live.Down(e.Member.Name)
				}
			}),
		})
		if err != nil {
			return nil, err
		}
		return member{b}, nil
	})
}

type member struct{ b *migrate.Bridge }

func (m member) Join(seed string) error {
	_, err := m.b.Join(context.Background(), seed)
	return err
}

func (m member) Shutdown() error { return m.b.Shutdown() }
