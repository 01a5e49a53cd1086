package swim_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/swim-go/swim"
)

// Example is the quick start of the README: start a member, join a cluster
// through one seed, list the members, leave and shut down. It has no Output
// section, so `go test` compiles it but does not run it (it would need a
// seed at 10.0.0.1).
func Example() {
	cfg := swim.DefaultLANConfig()
	cfg.Name = "node-a" // unique in the cluster; the default is the host name
	cfg.BindPort = 7946 // UDP and TCP; 0 picks a free port
	cfg.Events = swim.EventFunc(func(e swim.Event) {
		// Called on a goroutine of its own, one event at a time, in order.
		log.Printf("%s %s (state %s, incarnation %d)",
			e.Kind, e.Member.Name, e.Member.State, e.Member.Incarnation)
	})

	ml, err := swim.New(cfg)
	if err != nil {
		log.Fatalf("start: %v", err) // a *swim.ConfigError names a bad field
	}

	joinCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := ml.Join(joinCtx, "10.0.0.1:7946"); err != nil {
		// No seed answered. Not fatal: while this member is alone it
		// retries its seeds every ReconnectInterval.
		log.Printf("join: %v", err)
	} else {
		log.Printf("joined through %d seed(s)", n)
	}

	for _, m := range ml.Members() { // alive and suspect members, self included
		fmt.Println(m.Name, m.Addr, m.State)
	}

	// ... run the service ...

	// On the way out: tell the others (bounded wait), then stop.
	leaveCtx, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLeave()
	if err := ml.Leave(leaveCtx); err != nil {
		log.Printf("leave: %v", err)
	}
	if err := ml.Shutdown(); err != nil {
		log.Printf("shutdown: %v", err)
	}
}
