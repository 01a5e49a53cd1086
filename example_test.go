package swim_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/swim-go/swim"
)

// Example_quickStart is the README's quick start, line for line: three
// members in one process, each on a free port of 127.0.0.1, two of them
// joining through the first; once gossip has told everyone about everyone,
// each lists the members it sees, and one leaves gracefully.
func Example_quickStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var members []*swim.Memberlist
	for _, name := range []string{"a", "b", "c"} {
		cfg := swim.DefaultLocalConfig() // one host; DefaultLANConfig for a data centre
		cfg.Name = name                  // unique in the cluster
		cfg.BindPort = 0                 // UDP and TCP on one free port of 127.0.0.1
		ml, err := swim.New(cfg)
		if err != nil {
			log.Fatal(err) // a *swim.ConfigError names the bad field
		}
		defer ml.Shutdown()
		members = append(members, ml)
	}

	seed := members[0].LocalMember().Addr.String()
	for _, ml := range members[1:] {
		if _, err := ml.Join(ctx, seed); err != nil {
			log.Fatal(err)
		}
	}

	// A join is a full state exchange with the seed; the other members
	// hear of it by gossip, a moment later.
	waitFor(ctx, func() bool {
		for _, ml := range members {
			if ml.NumMembers() != len(members) {
				return false
			}
		}
		return true
	})
	for _, ml := range members {
		var names []string
		for _, m := range ml.Members() { // alive and suspect members, sorted by name
			names = append(names, m.Name)
		}
		fmt.Println(ml.LocalMember().Name, "sees", strings.Join(names, " "))
	}

	// A graceful leave: the others report c as left, not failed.
	if err := members[2].Leave(ctx); err != nil {
		log.Fatal(err)
	}
	waitFor(ctx, func() bool { return members[0].NumMembers() == 2 })
	fmt.Println("after c left, a sees", members[0].NumMembers(), "members")
	// Output:
	// a sees a b c
	// b sees a b c
	// c sees a b c
	// after c left, a sees 2 members
}

// waitFor polls cond until it holds; it ends the program if ctx ends first.
func waitFor(ctx context.Context, cond func() bool) {
	for !cond() {
		select {
		case <-ctx.Done():
			log.Fatal("gave up waiting: ", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Example_events shows the events a member reports about the others: a
// join, then a graceful leave. The handler runs on a goroutine of its own,
// one event at a time, in order; here it hands each event to the example.
func Example_events() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan swim.Event, 16)

	cfg := swim.DefaultLocalConfig()
	cfg.Name = "a"
	cfg.BindPort = 0
	cfg.Events = swim.EventFunc(func(e swim.Event) { events <- e })
	a, err := swim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Shutdown()

	cfg = swim.DefaultLocalConfig()
	cfg.Name = "b"
	cfg.BindPort = 0
	b, err := swim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Shutdown()

	next := func() swim.Event {
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			log.Fatal("no event: ", ctx.Err())
			return swim.Event{}
		}
	}
	if _, err := b.Join(ctx, a.LocalMember().Addr.String()); err != nil {
		log.Fatal(err)
	}
	e := next()
	fmt.Println(e.Kind, e.Member.Name, e.Member.State)
	if err := b.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	e = next()
	fmt.Println(e.Kind, e.Member.Name, e.Member.State)
	// Output:
	// join b alive
	// leave b left
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
		cfg.Security.Keys = [][]byte{oldKey}
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
	waitFor(ctx, func() bool {
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

// TestReadmeQuickStartIsTheExample keeps the README's quick start and
// Example_quickStart the same code, so that the program a reader copies is
// the one `go test` runs and checks.
func TestReadmeQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block, ok := between(string(readme), "```go\n", "```\n")
	if !ok {
		t.Fatal("README.md has no Go code block")
	}
	for _, part := range []struct{ name, readmeStart, exampleStart, end string }{
		{"the quick start's body", "func main() {\n", "func Example_quickStart() {\n", "\n\t// Output:"},
		{"waitFor", "func waitFor(", "func waitFor(", "\n}\n"},
	} {
		want, ok := between(string(source), part.exampleStart, part.end)
		if !ok {
			t.Fatalf("example_test.go: %s not found", part.name)
		}
		end := part.end
		if part.readmeStart == "func main() {\n" {
			end = "\n}\n"
		}
		got, ok := between(block, part.readmeStart, end)
		if !ok {
			t.Fatalf("README.md's quick start: %s not found", part.name)
		}
		if got != want {
			t.Errorf("README.md's quick start and example_test.go differ in %s:\nREADME:\n%s\nexample_test.go:\n%s", part.name, got, want)
		}
	}
}

// between returns the text of s after the first start and before the first
// end that follows it.
func between(s, start, end string) (string, bool) {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(rest, end)
	return in, ok
}
