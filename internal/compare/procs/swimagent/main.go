// Command swimagent is the per-process comparison's swim agent: one swim
// member with swim.DefaultLANConfig, no logger (swim's default: nothing is
// logged), on the address and port it is given. See package agent for its
// protocol and ../main.go for the driver that runs it.
//
// SWIMAGENT_SIGNATURES in its environment sets Config.Claims.Signatures (off, sign
// or required; off when unset): the driver's swim-signed runs this binary
// with required. The identity is the one swim.New generates for each
// process.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/internal/compare/procs/agent"
)

// signaturesEnv names the environment variable that sets Config.Claims.Signatures.
const signaturesEnv = "SWIMAGENT_SIGNATURES"

func main() {
	agent.Main(func(c agent.Config, live *agent.Live) (agent.Member, error) {
		cfg := swim.DefaultLANConfig()
		cfg.Name = c.Name
		cfg.BindAddr = c.Bind
		cfg.BindPort = c.Port
		if s := os.Getenv(signaturesEnv); s != "" {
			mode, err := swim.ParseSignatureMode(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", signaturesEnv, err)
			}
			cfg.Claims.Signatures = mode
		}
		cfg.Events = swim.EventFunc(func(e swim.Event) {
			switch e.Kind {
			case swim.EventJoin:
				live.Up(e.Member.Name)
			case swim.EventLeave:
				live.Down(e.Member.Name)
			case swim.EventRestart:
				live.Restarted(e.Member.Name)
			}
		})
		ml, err := swim.New(cfg)
		if err != nil {
			return nil, err
		}
		return member{ml}, nil
	})
}

type member struct{ ml *swim.Memberlist }

func (m member) Join(seed string) error {
	_, err := m.ml.Join(context.Background(), seed)
	return err
}

func (m member) Shutdown() error { return m.ml.Shutdown() }
