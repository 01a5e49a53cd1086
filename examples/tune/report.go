package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// choose marks the outcomes that meet the budget (every crash known by
// every survivor, false deaths per member-hour at most budget) and returns
// the index of the recommended one, or -1 if none meets it. The
// recommendation is the fastest detection at p99; ties (at millisecond
// resolution) go to the better p50, then to fewer false suspicions (each is
// an alarm and a refutation), then to fewer bytes, then to grid order.
func choose(outs []outcome, budget float64) int {
	best := -1
	for i := range outs {
		o := &outs[i]
		o.meets = o.missed == 0 && o.detect.N > 0 && o.deathRate <= budget
		if !o.meets {
			continue
		}
		if best < 0 || better(o, &outs[best]) {
			best = i
		}
	}
	return best
}

func better(a, b *outcome) bool {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	if c := cmp.Compare(ms(a.detect.P99), ms(b.detect.P99)); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(ms(a.detect.P50), ms(b.detect.P50)); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.suspicionRate, b.suspicionRate); c != 0 {
		return c < 0
	}
	return a.bytesPerSecond < b.bytesPerSecond
}

// secs formats a duration as seconds with two decimals, the table's unit.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// rate formats a per-member-hour rate with three significant digits.
func rate(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// mult formats a tolerance multiple: "1", "0.75".
func mult(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// scenarioLine describes the simulated network, for the table and the plot.
func scenarioLine(o *options) string {
	return fmt.Sprintf("%d members, %s%% loss, one-way latency p50 %v p99 %v (lognormal), pauses of %v, %s profile",
		o.n, strconv.FormatFloat(100*o.loss, 'g', 4, 64), o.p50, o.p99, o.pause, strings.ToUpper(o.profile))
}

// report prints the table, the recommendation and its Config lines.
func report(w io.Writer, o *options, outs []outcome, best int) {
	crashes, pauses := 0, 0
	for _, f := range schedule(o, 1) {
		if f.crash {
			crashes++
		} else {
			pauses++
		}
	}
	_, slot := o.slots()
	// The resolution: one false death in the member-hours a setting was
	// measured over (they differ a little with the detection tail).
	hours := outs[0].memberHours
	for _, x := range outs {
		hours = min(hours, x.memberHours)
	}
	perMemberHour := float64(pauses) / (float64(o.n) * o.duration.Hours())
	fmt.Fprintf(w, "swim tune: %s\n", scenarioLine(o))
	fmt.Fprintf(w, "each run: %v measured; %d crashes, one every %v; %d pauses of %v (%.2g per member-hour, far more than a real cluster sees)\n",
		o.duration, crashes, slot.Round(100*time.Millisecond), pauses, o.pause, perMemberHour)
	fmt.Fprintf(w, "each setting: %d seed(s), %.1f member-hours: one false death = %s per member-hour\n", o.seeds, hours, rate(1/hours))
	fmt.Fprintf(w, "budget: at most %s false deaths per member-hour, and every crash known by every survivor\n\n", rate(o.budget))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tk\tPauseTolerance\tSuspicionMult\tdetect p50\tdetect p99\tdetected\tfalse deaths/member-h (n)\tfalse suspicions/member-h\tbytes/member/s\tbudget\t")
	for i, x := range outs {
		mark := ""
		if i == best {
			mark = "*"
		}
		p50, p99 := "-", "-"
		if x.detect.N > 0 {
			p50, p99 = secs(x.detect.P50), secs(x.detect.P99)
		}
		verdict := "over"
		if x.meets {
			verdict = "ok"
		}
		fmt.Fprintf(tw, "%s\t%d\t%v (%sx)\t%d\t%s\t%s\t%d/%d\t%s (%d)\t%s\t%.0f\t%s\t\n",
			mark, x.K, x.Tolerance, mult(x.TolMult), x.SuspicionMult, p50, p99,
			x.crashes-x.missed, x.crashes, rate(x.deathRate), x.falseDeaths, rate(x.suspicionRate), x.bytesPerSecond, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "detect: crash until every survivor declared it dead, pooled over the seeds (with a few crashes per setting, p99 is the worst)")
	fmt.Fprintln(w, "bytes: UDP sent per member and second, the gossip of the crashes and pauses included")
	fmt.Fprintln(w)

	if best < 0 {
		fmt.Fprintf(w, "no setting meets the budget (%s false deaths per member-hour, every crash detected).\n", rate(o.budget))
		closest := 0
		for i := range outs {
			if outs[i].missed < outs[closest].missed ||
				(outs[i].missed == outs[closest].missed && outs[i].deathRate < outs[closest].deathRate) {
				closest = i
			}
		}
		x := outs[closest]
		fmt.Fprintf(w, "closest: %v, %s false deaths per member-hour, %d of %d crashes missed.\n", x.setting, rate(x.deathRate), x.missed, x.crashes)
		fmt.Fprintln(w, "try larger -tol multiples (a longer PauseTolerance), a larger -budget, or check that -pause and the latency are what you meant.")
		return
	}
	x := outs[best]
	fmt.Fprintf(w, "recommended (*): IndirectChecks %d, PauseTolerance %v, SuspicionMult %d\n", x.K, x.Tolerance, x.SuspicionMult)
	fmt.Fprintf(w, "  every survivor knows of a crash within %s (p50) / %s (p99); %s in %.1f member-hours; %.0f bytes/member/s\n",
		secs(x.detect.P50), secs(x.detect.P99), falseDeaths(x.falseDeaths), x.memberHours, x.bytesPerSecond)
	// False deaths near the boundary are rare and random, and IndirectChecks
	// hardly changes how a pause ends: deaths in the sibling rows are a
	// warning that this row may have been lucky.
	deaths, sibHours := 0, 0.0
	for _, y := range outs {
		if y.Tolerance == x.Tolerance && y.SuspicionMult == x.SuspicionMult && y.K != x.K {
			deaths += y.falseDeaths
			sibHours += y.memberHours
		}
	}
	if deaths > 0 {
		fmt.Fprintf(w, "  note: the other IndirectChecks values at PauseTolerance %v had %s in %.1f member-hours (%s per member-hour);\n",
			x.Tolerance, falseDeaths(deaths), sibHours, rate(float64(deaths)/sibHours))
		fmt.Fprintln(w, "  this row may have been lucky: run more -seeds, or prefer a larger tolerance that meets the budget")
	}
	if x.Tolerance < o.pause {
		fmt.Fprintf(w, "  note: PauseTolerance is below the %v pause; it survived because a suspicion needs confirmations from\n", o.pause)
		fmt.Fprintln(w, "  other members before it can end, which take longer than the tolerance here: a smaller cluster may not wait as long")
	}
	fmt.Fprintln(w)
	for _, line := range configLines(o, x.setting) {
		fmt.Fprintf(w, "\t%s\n", line)
	}
}

func falseDeaths(n int) string {
	if n == 1 {
		return "1 false death"
	}
	return fmt.Sprintf("%d false deaths", n)
}

// configLines is the Go code that builds the recommended Config.
func configLines(o *options, s setting) []string {
	return []string{
		fmt.Sprintf("cfg := swim.%s()", profileFunc(o.profile)),
		fmt.Sprintf("cfg.IndirectChecks = %d", s.K),
		fmt.Sprintf("cfg.PauseTolerance = %s", goDuration(s.Tolerance)),
		fmt.Sprintf("cfg.SuspicionMult = %d", s.SuspicionMult),
	}
}

// goDuration writes d as a Go expression in the largest unit that divides
// it: 3 * time.Second, 3750 * time.Millisecond, time.Minute.
func goDuration(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"},
		{time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"},
	}
	for _, u := range units {
		if d != 0 && d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("time.Duration(%d)", int64(d))
}
