package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/swim-go/swim/internal/chaos"
)

// massRestart kills every agent but the first, one every o.restartEvery,
// each replaced at once by a new process under its name at its port that
// joins through the first: a rolling restart gone fast, or a whole
// deployment restarted, with every process's state lost (memberlist
// #311). Then it measures how long until every agent sees N live members
// again, whether they all still do o.holdFor later, and how many deaths
// the agents reported of members whose new process was already running.
func (c *cluster) massRestart(ctx context.Context, ns *chaos.Namespace, o *options, bin string, basePort int, logDir string) (restartResult, error) {
	var res restartResult
	restartedAt := make(map[string]time.Time, c.n)
	first := time.Now()
	logf("%s: killing %d agents, one every %v, each started again %v after its kill", c.procs[0].name, c.n-1, o.restartEvery, o.restartDown)
	// The timeline: agent i is killed at (i-1)·every and started at that
	// plus down; with down over every, kills and starts interleave.
	type step struct {
		at    time.Time
		i     int
		start bool
	}
	var steps []step
	for i := 1; i < c.n; i++ {
		kill := first.Add(time.Duration(i-1) * o.restartEvery)
		steps = append(steps, step{kill, i, false}, step{kill.Add(o.restartDown), i, true})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
	for _, st := range steps {
		if err := pause(ctx, time.Until(st.at)); err != nil {
			return res, err
		}
		if !st.start {
			old := c.procs[st.i]
			_ = old.cmd.Process.Kill()
			_ = old.stdin.Close()
			select {
			case <-old.done:
			case <-time.After(10 * time.Second):
				return res, fmt.Errorf("%s (pid %d) not reaped 10s after SIGKILL", old.name, old.cmd.Process.Pid)
			}
			c.mu.Lock()
			old.exitErr = nil // killed on purpose: waitFor must not take it for a failure
			c.mu.Unlock()
			continue
		}
		old := c.procs[st.i]
		p, err := c.start(ns, bin, old.name, basePort+st.i, logDir)
		if err != nil {
			return res, err
		}
		c.mu.Lock()
		c.procs[st.i] = p
		c.mu.Unlock()
		if err := c.waitFor(ctx, o.readyBound, p.name+" listening", func() (bool, string) {
			return p.ready || p.startErr != "", "not yet"
		}); err != nil {
			return res, err
		}
		if p.startErr != "" {
			return res, fmt.Errorf("%s: %s", p.name, p.startErr)
		}
		restartedAt[p.name] = time.Now()
		if _, err := fmt.Fprintf(p.stdin, "join %s\n", c.procs[0].addr); err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
		res.Restarted++
	}
	last := time.Now()
	res.Span = last.Sub(first).Seconds()

	all := func() (bool, string) {
		short, minLive := 0, c.n
		for _, p := range c.procs {
			if p.live < c.n {
				short++
			}
			minLive = min(minLive, p.live)
		}
		return short == 0, fmt.Sprintf("%d agents see fewer than %d (the fewest %d)", short, c.n, minLive)
	}
	err := c.waitFor(ctx, o.healBound, "every agent seeing all", all)
	var timeout *timeoutError
	switch {
	case err == nil:
		res.Healed = time.Since(last).Seconds()
		logf("every agent sees %d %.2fs after the last restart", c.n, res.Healed)
	case errors.As(err, &timeout):
		res.Healed = math.Inf(1)
		logf("%s", timeout.msg)
	default:
		return res, err
	}
	if err := pause(ctx, o.holdFor); err != nil {
		return res, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Held, _ = all()
	for _, p := range c.procs {
		if p.live < c.n {
			res.Short = append(res.Short, fmt.Sprintf("%s sees %d", p.name, p.live))
		}
	}
	dead := map[string]bool{}
	for _, d := range c.downs {
		at, ok := restartedAt[d.node]
		if !ok || d.at.Before(at) {
			continue // before its new process ran
		}
		res.Deaths++
		dead[d.node] = true
		if d.at.Sub(at) >= time.Second {
			res.DeathsLate++
		}
	}
	res.DeadMembers = len(dead)
	// Told: the survivors (the agent that stayed, and every restarted one
	// whose own new process ran first) that reported a restarted member
	// alive or restarted after its new process started.
	told := map[[2]string]bool{}
	for _, e := range c.told {
		if at, ok := restartedAt[e.node]; ok && !e.at.Before(at) {
			if oat, restarted := restartedAt[e.observer]; !restarted || oat.Before(at) {
				told[[2]string{e.observer, e.node}] = true
			}
		}
	}
	for name, at := range restartedAt {
		for _, p := range c.procs {
			if p.name == name {
				continue
			}
			if oat, restarted := restartedAt[p.name]; !restarted || oat.Before(at) {
				res.Pairs++
				if told[[2]string{p.name, name}] {
					res.Told++
				}
			}
		}
	}
	logf("deaths reported of members whose new process ran: %d (%d members); held: %v", res.Deaths, res.DeadMembers, res.Held)
	return res, nil
}
