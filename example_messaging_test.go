package swim_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/swim-go/swim"
)

// Example_messages sends application data three ways between three
// members in one process: a UDP message to one member, an acknowledged
// message over a stream to another, and a broadcast that every other
// member delivers once.
func Example_messages() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var mu sync.Mutex
	var got []string
	var members []*swim.Memberlist
	for _, name := range []string{"a", "b", "c"} {
		cfg := swim.DefaultLocalConfig()
		cfg.Name = name
		cfg.BindPort = 0
		cfg.Messages = swim.MessageFunc(func(m swim.Message) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s got %q from %s (%s)", name, m.Payload, m.From, m.Kind))
		})
		ml, err := swim.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer ml.Shutdown()
		members = append(members, ml)
	}
	for _, ml := range members[1:] {
		if _, err := ml.Join(ctx, members[0].LocalMember().Addr.String()); err != nil {
			log.Fatal(err)
		}
	}
	waitFor(ctx, func() bool { return members[1].NumMembers() == 3 && members[2].NumMembers() == 3 })

	a := members[0]
	if err := a.SendBestEffort("b", []byte("hello over UDP")); err != nil {
		log.Fatal(err)
	}
	if err := a.SendReliable(ctx, "c", []byte("hello over TCP")); err != nil {
		log.Fatal(err) // nil: c has it
	}
	done, err := a.Broadcast([]byte("hello, all"), "greeting")
	if err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil { // sent as often as it will be
		log.Fatal(err)
	}
	waitFor(ctx, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 4
	})
	sort.Strings(got)
	fmt.Println(strings.Join(got, "\n"))
	// Output:
	// b got "hello over UDP" from a (best-effort)
	// b got "hello, all" from a (broadcast)
	// c got "hello over TCP" from a (reliable)
	// c got "hello, all" from a (broadcast)
}

// Example_snapshot combines a snapshot of the member table with the
// events that follow it: the events whose Seq is above the snapshot's are
// applied, the others are already in it.
func Example_snapshot() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan swim.Event, 64)
	cfg := swim.DefaultLocalConfig()
	cfg.Name, cfg.BindPort = "a", 0
	cfg.Events = swim.EventFunc(func(e swim.Event) { events <- e })
	a, err := swim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Shutdown()

	members, seq := a.Snapshot()
	view := map[string]swim.State{}
	for _, m := range members {
		view[m.Name] = m.State
	}

	cfg = swim.DefaultLocalConfig()
	cfg.Name, cfg.BindPort = "b", 0
	b, err := swim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Shutdown()
	if _, err := b.Join(ctx, a.LocalMember().Addr.String()); err != nil {
		log.Fatal(err)
	}
	for len(view) < 2 {
		select {
		case e := <-events:
			if e.Seq > seq { // after the snapshot
				view[e.Member.Name] = e.Member.State
				seq = e.Seq
			}
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		}
	}
	fmt.Println("a:", view["a"], "b:", view["b"])
	// Output: a: alive b: alive
}
