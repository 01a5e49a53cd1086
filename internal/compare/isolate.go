package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Each cluster runs in a process of its own (-isolate, the default). In one
// process, what a run leaves behind lands in the next run's figures: timers
// a library left armed (memberlist's suspicion timers, minutes long, by the
// hundred thousand after a run that flapped) fire during the next window,
// and the garbage collector works through the previous run's heap. Swim's
// CPU at 64 members measured 0.19 and 0.63 ms/s per member in one
// invocation, depending on what ran before it.

// childPlan is a plan as passed to the child process.
type childPlan struct {
	Lib       string        `json:"lib"`
	N         int           `json:"n"`
	Matched   bool          `json:"matched"`
	Encrypted bool          `json:"encrypted"`
	BootBound time.Duration `json:"boot_bound"`
	Window    time.Duration `json:"window"`
	Crash     bool          `json:"crash"`
	Loss      float64       `json:"loss"`
}

func (p plan) child(lib string) childPlan {
	return childPlan{Lib: lib, N: p.n, Matched: p.matched, Encrypted: p.encrypted, BootBound: p.bootBound, Window: p.window, Crash: p.crash, Loss: p.loss}
}

func (c childPlan) plan() plan {
	return plan{n: c.N, matched: c.Matched, encrypted: c.Encrypted, bootBound: c.BootBound, window: c.Window, crash: c.Crash, loss: c.Loss}
}

// childFlag carries a childPlan to the child; childOutputPrefix marks the
// line of its stdout that holds the result.
const (
	childFlag         = "child"
	childOutputPrefix = "compare-result: "
)

// runIsolated runs one cluster, in a child process of this binary (same
// flags) unless -isolate=false.
func runIsolated(lib library, p plan, o *options) result {
	if !o.isolate {
		return runCluster(lib, p, o)
	}
	spec, err := json.Marshal(p.child(lib.name()))
	if err != nil {
		return result{Library: lib.name(), N: p.n, Settings: p.settings(), Error: err.Error()}
	}
	args := []string{"-" + childFlag + "=" + string(spec)}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "json", "cpuprofile", "memprofile", "require-stable", childFlag: // the parent's alone
		default:
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	res := result{Library: lib.name(), N: p.n, Settings: p.settings()}
	if err := cmd.Run(); err != nil {
		res.Error = fmt.Sprintf("child process: %v", err)
		return res
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if body, ok := strings.CutPrefix(line, childOutputPrefix); ok {
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				res.Error = fmt.Sprintf("child result: %v", err)
			}
			return res
		}
	}
	res.Error = "child process printed no result"
	return res
}

// runChild is main for a child process: one cluster, its result on stdout.
func runChild(spec string, o *options) {
	var c childPlan
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, "compare: bad -child plan:", err)
		os.Exit(2)
	}
	r := runCluster(libByName(c.Lib), c.plan(), o)
	body, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	fmt.Println(childOutputPrefix + string(body))
}
