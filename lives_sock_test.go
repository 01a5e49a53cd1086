package swim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// timedLog records the events a member delivers and when.
type timedLog struct {
	mu     sync.Mutex
	events []Event
	at     []time.Time
}

func (l *timedLog) HandleEvent(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	l.at = append(l.at, time.Now())
}

// about returns the events about name delivered at or after since, and
// when each was.
func (l *timedLog) about(name string, since time.Time) ([]Event, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []Event
	var ats []time.Time
	for i, e := range l.events {
		if e.Member.Name == name && !l.at[i].Before(since) {
			evs = append(evs, e)
			ats = append(ats, l.at[i])
		}
	}
	return evs, ats
}

// TestRestartOverSockets: five members on 127.0.0.1; one is killed
// (Shutdown, no leave) and a new process under its name starts at once,
// first at the same port, then again at a new port. Every survivor gets
// EventRestart with the new life within two probe intervals of the
// restart, none suspects the member or declares it dead, and a message a
// survivor sends it after the event reaches the new process.
func TestRestartOverSockets(t *testing.T) {
	const n = 5
	logs := make([]*timedLog, n)
	cfgs := make([]*Config, n)
	for i := range cfgs {
		logs[i] = &timedLog{}
		cfgs[i] = testConfig(fmt.Sprintf("node-%d", i))
		cfgs[i].Events = logs[i]
	}
	box := &inbox{}
	cfgs[n-1].Messages = box
	members := formCluster(t, cfgs...)
	victim := members[n-1]
	name := victim.LocalMember().Name
	seed := members[0].LocalMember().Addr.String()
	interval := cfgs[0].ProbeInterval

	for _, samePort := range []bool{true, false} {
		t.Run(fmt.Sprintf("samePort=%v", samePort), func(t *testing.T) {
			oldAddr, oldLife := victim.LocalMember().Addr, victim.LocalMember().Life
			killed := time.Now()
			require.NoError(t, victim.Shutdown())
			cfg := testConfig(name)
			if samePort {
				cfg.BindPort = int(oldAddr.Port())
			}
			box = &inbox{}
			cfg.Messages = box
			next := startMember(t, cfg)
			restarted := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
			defer cancel()
			_, err := next.Join(ctx, seed)
			require.NoError(t, err)
			life := next.LocalMember().Life
			require.NotEqual(t, oldLife, life)
			if samePort {
				require.Equal(t, oldAddr, next.LocalMember().Addr)
			} else {
				require.NotEqual(t, oldAddr, next.LocalMember().Addr)
			}

			for i, m := range members[:n-1] {
				require.Eventually(t, func() bool {
					evs, _ := logs[i].about(name, killed)
					for _, e := range evs {
						if e.Kind == EventRestart && e.Member.Life == life {
							return true
						}
					}
					return false
				}, formTimeout, pollEvery, "%s got no restart event", m.LocalMember().Name)
				evs, ats := logs[i].about(name, killed)
				for j, e := range evs {
					switch e.Kind {
					case EventRestart:
						require.Equal(t, next.LocalMember().Addr, e.Member.Addr)
						took := ats[j].Sub(restarted)
						t.Logf("%s: restart event %v after the restart", m.LocalMember().Name, took.Round(time.Millisecond))
						require.LessOrEqual(t, took, 2*interval, "%s: the restart event came late", m.LocalMember().Name)
					case EventSuspect, EventLeave:
						t.Fatalf("%s: %s of the restarted member", m.LocalMember().Name, e.Kind)
					}
				}
				mb, ok := m.Member(name)
				require.True(t, ok)
				require.Equal(t, next.LocalMember().Addr, mb.Addr)
				payload := fmt.Sprintf("to the new life from %s", m.LocalMember().Name)
				require.NoError(t, m.SendBestEffort(name, []byte(payload)))
				require.Eventually(t, func() bool { return box.has(MessageBestEffort, m.LocalMember().Name, payload) },
					formTimeout, pollEvery, "the new life did not get the message")
				require.Zero(t, m.Stats().SuspicionsRaised)
			}
			victim = next
		})
	}
}
