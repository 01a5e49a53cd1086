package main

import (
	"fmt"
	"io"
	"strings"
)

func printHeader(w io.Writer, rep *report) {
	fmt.Fprintf(w, "# Broadcasts: swim and hashicorp/memberlist v0.7.0\n\n")
	fmt.Fprintf(w, "%s, %s; %d CPUs, GOMAXPROCS %d, %s; load average at the start %s.\n\n",
		rep.Date, rep.Command, rep.NumCPU, rep.GOMAXPROCS, rep.GoVersion, rep.LoadStart)
}

// printTable prints the runs of one N: the main table, both libraries side
// by side per rate; a table of details; the highest rate each library
// carried at 99% complete.
func printTable(w io.Writer, n int, o *options, rs []result) {
	byKey := map[string]*result{}
	var rates []float64
	for i := range rs {
		r := &rs[i]
		byKey[runKey(r.Library, r.Rate)] = r
		if len(rates) == 0 || rates[len(rates)-1] != r.Rate {
			rates = append(rates, r.Rate)
		}
	}
	get := func(lib string, rate float64) *result { return byKey[runKey(lib, rate)] }

	fmt.Fprintf(w, "## N = %d\n\n", n)
	fmt.Fprintf(w, "%s of load at each rate (the whole cluster's broadcasts per second), 100-byte payloads, LAN defaults. "+
		"complete: delivered by all %d other members; p50/p99: Broadcast call to the last delivery, over the complete ones; "+
		"copies: copies received per member per broadcast sent, duplicates included; CPU and bytes sent: per member per second over the load.\n\n",
		o.load, n-1)
	head := []string{"rate/s"}
	for _, l := range o.libs {
		head = append(head, l+" sent", l+" complete", l+" p50", l+" p99", l+" copies", l+" CPU ms/s", l+" B/s")
	}
	var rows [][]string
	for _, rate := range rates {
		row := []string{fmt.Sprintf("%g", rate)}
		for _, l := range o.libs {
			r := get(l, rate)
			switch {
			case r == nil:
				row = append(row, "", "", "", "", "", "", "")
			case r.Error != "":
				row = append(row, "error: "+r.Error, "", "", "", "", "", "")
			default:
				row = append(row, sentCell(r), fmt.Sprintf("%.1f%%", r.completePct()),
					latCell(r, r.P50Ms), latCell(r, r.P99Ms),
					fmt.Sprintf("%.2f", r.Receptions),
					fmt.Sprintf("%.2f", r.CPUMsPerMemberSec), fmt.Sprintf("%.0f", r.BytesPerMemberSec))
			}
		}
		rows = append(rows, row)
	}
	writeMarkdown(w, head, rows)

	// Details: why broadcasts fell short, and what each library's
	// machinery did meanwhile.
	fmt.Fprintf(w, "\nDetails at N = %d. deliveries: of the sent broadcasts to the other members; drain: seconds after the load until every sent broadcast was complete and copies stopped (-drain %v at most); "+
		"slowest call: the longest Broadcast (memberlist: QueueBroadcast) call; swim tree: Trees.Redundant / Trees.GraftsSent / Trees.GraftsAbandoned / Trees.PushesDropped, summed over the members, load and drain; "+
		"memberlist queued: broadcasts waiting in the members' queues when the load ended.\n\n", n, o.drain)
	head = []string{"rate/s"}
	for _, l := range o.libs {
		head = append(head, l+" deliveries", l+" drain s", l+" slowest call")
		switch l {
		case "swim":
			head = append(head, "swim tree")
		case "memberlist":
			head = append(head, "memberlist queued")
		}
	}
	head = append(head, "UDP rcvbuf drops (host)")
	rows = nil
	for _, rate := range rates {
		row := []string{fmt.Sprintf("%g", rate)}
		var drops []string
		for _, l := range o.libs {
			r := get(l, rate)
			if r == nil || r.Error != "" {
				row = append(row, "", "", "", "")
				continue
			}
			row = append(row, fmt.Sprintf("%.2f%%", r.ReachedPct), fmt.Sprintf("%.1f", r.DrainSeconds), fmtMs(r.CallMaxMs))
			c := r.Counters
			switch l {
			case "swim":
				row = append(row, fmt.Sprintf("%d / %d / %d / %d", c["Trees.Redundant"], c["Trees.GraftsSent"], c["Trees.GraftsAbandoned"], c["Trees.PushesDropped"]))
			case "memberlist":
				row = append(row, fmt.Sprintf("%d", c["QueuedAtLoadEnd"]))
			}
			drops = append(drops, fmt.Sprintf("%d", r.RcvbufErrs))
		}
		rows = append(rows, append(row, strings.Join(drops, " / ")))
	}
	writeMarkdown(w, head, rows)
	fmt.Fprintln(w)
	for _, note := range anomalies(rs) {
		fmt.Fprintln(w, "- "+note)
	}

	// The highest rate each library carried at 99% complete, and the
	// ratio.
	best := map[string]float64{}
	var parts []string
	for _, l := range o.libs {
		for _, rate := range rates {
			if r := get(l, rate); r != nil && r.Error == "" && r.completePct() >= 99 && rate > best[l] {
				best[l] = rate
			}
		}
		if best[l] > 0 {
			parts = append(parts, fmt.Sprintf("%s %g/s", l, best[l]))
		} else {
			parts = append(parts, fmt.Sprintf("%s none of the rates tried", l))
		}
	}
	line := fmt.Sprintf("Highest rate with at least 99%% complete at N = %d: %s", n, strings.Join(parts, ", "))
	if s, m := best["swim"], best["memberlist"]; s > 0 && m > 0 {
		line += fmt.Sprintf(" (swim/memberlist %.3g×)", s/m)
	}
	fmt.Fprintf(w, "\n%s.\n\n", line)
}

func runKey(lib string, rate float64) string { return fmt.Sprintf("%s@%g", lib, rate) }

// sentCell is the broadcasts attempted, with those not sent and why.
func sentCell(r *result) string {
	s := fmt.Sprintf("%d", r.Attempted)
	var why []string
	if r.Full > 0 {
		why = append(why, fmt.Sprintf("%d queue full", r.Full))
	}
	if r.Backlog > 0 {
		why = append(why, fmt.Sprintf("%d backlog", r.Backlog))
	}
	if r.Errors > 0 {
		why = append(why, fmt.Sprintf("%d errors", r.Errors))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

func latCell(r *result, v float64) string {
	if r.Complete == 0 {
		return "-"
	}
	return fmtMs(v)
}

func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// anomalies lists what should not happen in a run: swim delivering a
// broadcast twice or to its origin, payloads not of the run, goroutines
// left, swim's outcomes other than sent, messages dropped before the
// handler.
func anomalies(rs []result) []string {
	var out []string
	for _, r := range rs {
		tag := fmt.Sprintf("%s at %g/s", r.Library, r.Rate)
		if r.Twice > 0 {
			out = append(out, fmt.Sprintf("%s: %d broadcasts handed to a member's handler twice", tag, r.Twice))
		}
		if r.Self > 0 {
			out = append(out, fmt.Sprintf("%s: %d broadcasts handed to their origin's handler", tag, r.Self))
		}
		if r.Foreign > 0 {
			out = append(out, fmt.Sprintf("%s: %d payloads not of this run", tag, r.Foreign))
		}
		if r.LeftRoutines > 0 {
			out = append(out, fmt.Sprintf("%s: %d goroutines left after shutdown", tag, r.LeftRoutines))
		}
		if r.FirstError != "" {
			out = append(out, fmt.Sprintf("%s: first Broadcast error: %s", tag, r.FirstError))
		}
		for _, k := range []string{"MessagesDropped", "Broadcasts.Dropped", "Broadcasts.Refused", "Broadcasts.Stale"} {
			if v := r.Counters[k]; v > 0 && r.Library == "swim" {
				out = append(out, fmt.Sprintf("%s: %s %d", tag, k, v))
			}
		}
		for k, v := range r.Outcomes {
			if k != "sent" && v > 0 {
				out = append(out, fmt.Sprintf("%s: %d broadcasts' outcome %s", tag, v, k))
			}
		}
	}
	return out
}

// writeMarkdown writes a markdown table, columns padded to align.
func writeMarkdown(w io.Writer, head []string, rows [][]string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len([]rune(h))
	}
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-len([]rune(c))))
		}
		fmt.Fprintln(w, b.String())
	}
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, row := range rows {
		line(row)
	}
}
