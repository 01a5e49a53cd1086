package swim_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"strings"
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

// Example_encrypted runs three members in one process with a shared key
// and a cluster label, then rotates the key on the running cluster: each
// step (install, use, remove) on every member before the next, so that no
// member ever receives traffic it cannot open.
func Example_encrypted() {
	oldKey := bytes.Repeat([]byte{1}, 32) // in production: 32 random bytes from your secret store
	newKey := bytes.Repeat([]byte{2}, 32)
	var members []*swim.Memberlist
	for _, name := range []string{"a", "b", "c"} {
		cfg := swim.DefaultLocalConfig()
		cfg.Name = name
		cfg.BindPort = 0
		cfg.Keys = [][]byte{oldKey}
		cfg.Label = "example"
		ml, err := swim.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer ml.Shutdown()
		members = append(members, ml)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seed := members[0].LocalMember().Addr.String()
	for _, ml := range members[1:] {
		if _, err := ml.Join(ctx, seed); err != nil {
			log.Fatal(err)
		}
	}
	waitUntil(ctx, func() bool {
		for _, ml := range members {
			if ml.NumMembers() != len(members) {
				return false
			}
		}
		return true
	})
	for _, ml := range members {
		var names []string
		for _, m := range ml.Members() {
			names = append(names, m.Name)
		}
		fmt.Println(ml.LocalMember().Name, "sees", strings.Join(names, " "))
	}

	for _, step := range []func(*swim.Memberlist) error{
		func(ml *swim.Memberlist) error { return ml.InstallKey(newKey) },
		func(ml *swim.Memberlist) error { return ml.UseKey(newKey) },
		func(ml *swim.Memberlist) error { return ml.RemoveKey(oldKey) },
	} {
		for _, ml := range members {
			if err := step(ml); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println("keys after rotation:", len(members[0].ListKeys()), "members:", members[0].NumMembers())
	// Output:
	// a sees a b c
	// b sees a b c
	// c sees a b c
	// keys after rotation: 1 members: 3
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(ctx context.Context, cond func() bool) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
