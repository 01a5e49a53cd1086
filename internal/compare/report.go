package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// cell is one table entry: its text and, when it is a plain figure, its
// value for the ratio.
type cell struct {
	text string
	val  float64
	num  bool
}

func num(format string, v float64) cell { return cell{text: fmt.Sprintf(format, v), val: v, num: true} }
func txt(s string) cell                 { return cell{text: s} }

// metric is one row kind of the table.
type metric struct {
	name string
	get  func(r *result) cell
}

func steadyCell(r *result, c cell) cell {
	if !r.Converged {
		c.text += " *"
	}
	return c
}

var metrics = []metric{
	{"bootstrap: all see N", func(r *result) cell {
		if r.Converged {
			return num("%.1f s", r.BootSeconds)
		}
		t := fmt.Sprintf("did not converge in %.0f s (got %d/%d, median %d", r.BootBound, r.SeenMin, r.N, r.SeenMedian)
		if r.Joined < r.N-1 {
			t += fmt.Sprintf("; %d of %d joins done", r.Joined, r.N-1)
		}
		t += ")"
		return txt(t)
	}},
	{"false deaths, bootstrap+steady", func(r *result) cell {
		return falseCell(r.FalseBoot+r.FalseSteady, r.FalseBootWho+r.FalseSteadyWho)
	}},
	{"CPU per node", func(r *result) cell { return steadyCell(r, num("%.3f ms/s", r.CPUMsPerNodeSec)) }},
	{"bytes sent per node", func(r *result) cell { return steadyCell(r, num("%.0f B/s", r.BytesPerNodeSec)) }},
	{"  of which TCP", func(r *result) cell { return steadyCell(r, num("%.0f B/s", r.TCPBytesNodeSec)) }},
	{"packets sent per node", func(r *result) cell { return steadyCell(r, num("%.2f /s", r.PacketsNodeSec)) }},
	{"heap in use per node", func(r *result) cell { return steadyCell(r, num("%.1f KiB", r.HeapPerNode/1024)) }},
	{"stacks per node", func(r *result) cell { return steadyCell(r, num("%.1f KiB", r.StackPerNode/1024)) }},
	{"crash 1%: all survivors know, p50", func(r *result) cell { return crashCell(r, r.CrashP50) }},
	{"crash 1%: all survivors know, max", func(r *result) cell { return crashCell(r, r.CrashMax) }},
	{"false deaths, crash phase", func(r *result) cell {
		if !r.CrashRun {
			return txt("n/a")
		}
		return falseCell(r.FalseCrash, r.FalseCrashWho)
	}},
	{"false deaths, UDP loss", func(r *result) cell {
		if !r.LossRun {
			return txt("n/a")
		}
		c := falseCell(r.FalseLoss, r.FalseLossWho)
		if r.SeenMinLoss != r.N-r.Crashed {
			c.text += fmt.Sprintf(" (after: min %d, median %d of %d)", r.SeenMinLoss, r.SeenMedianLoss, r.N-r.Crashed)
		}
		return c
	}},
}

func falseCell(events, members int) cell {
	if events == 0 {
		return cell{text: "0", val: 0}
	}
	return cell{text: fmt.Sprintf("%d (%d members)", events, members), val: float64(events)}
}

func crashCell(r *result, v float64) cell {
	switch {
	case r.Error != "":
		return txt("error")
	case !r.CrashRun:
		return txt("n/a (not converged)")
	case !r.CrashComplete:
		return txt(fmt.Sprintf("not all within %.0f s (%.1f%% known)", r.CrashBound, r.CrashKnownPct))
	}
	c := num("%.2f s", v)
	if r.CrashKnewPct < 100 {
		c.text += fmt.Sprintf(" * (%.1f%% knew)", r.CrashKnewPct)
	}
	return c
}

func find(rs []result, lib, settings string, n int) *result {
	for i := range rs {
		if rs[i].Library == lib && rs[i].Settings == settings && rs[i].N == n {
			return &rs[i]
		}
	}
	return nil
}

// pair returns the swim and memberlist results of one pass and size;
// memberlist's come from the LAN-defaults pass for the matched one, since
// memberlist runs its own defaults there.
func pair(rep *report, settings string, n int) (sw, ml *result) {
	mlSettings := settings
	if settings == settingsMatched {
		mlSettings = settingsLAN
	}
	return find(rep.Results, "swim", settings, n), find(rep.Results, "memberlist", mlSettings, n)
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "swim vs hashicorp/memberlist v0.7.0, one process on 127.0.0.1\n")
	fmt.Fprintf(w, "date: %s\n", rep.Date)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s, %s", rep.NumCPU, rep.GOMAXPROCS, rep.Platform, rep.GoVersion)
	if rep.CPUModel != "" {
		fmt.Fprintf(w, ", %s", rep.CPUModel)
	}
	fmt.Fprintf(w, "\ncommand: %s\n", rep.Command)
	fmt.Fprintf(w, "load average: %s at start, %s at end; wall time %.0f s\n\n", rep.LoadStart, rep.LoadEnd, rep.WallSeconds)

	passes := []string{settingsLAN}
	for _, s := range []string{settingsMatched, settingsEncrypted} {
		if ranPass(rep, s) {
			passes = append(passes, s)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tN\tswim\tmemberlist\tswim/memberlist\t")
	for _, pass := range passes {
		title := "each library's LAN defaults"
		switch pass {
		case settingsMatched:
			title = "matched settings (see notes)"
		case settingsEncrypted:
			title = "each library's LAN defaults, encrypted (AES-256-GCM) and labelled"
		}
		fmt.Fprintf(tw, "== %s\t\t\t\t\t\n", title)
		for _, m := range metrics {
			for _, n := range rep.Sizes {
				sw, ml := pair(rep, pass, n)
				a, b := get(m, sw), get(m, ml)
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", m.name, n, a.text, b.text, ratio(a, b))
			}
		}
	}
	tw.Flush()
	if ranPass(rep, settingsEncrypted) {
		printEncryptionCost(w, rep)
	}
	printNotes(w, rep, ranPass(rep, settingsMatched))

	if len(rep.Search) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "largest N kept stable in one process (LAN defaults; every join done, no false death while joining nor over the window, median member sees N):")
		for _, l := range rep.Libraries {
			s, ok := rep.Search[l]
			if !ok {
				continue
			}
			fmt.Fprintf(w, "  %-10s %s  (%s)\n", l, largestText(s.Largest), s.Stopped)
			for _, st := range s.Steps {
				reused := ""
				if st.Reused {
					reused = " [from the table]"
				}
				fmt.Fprintf(w, "    N=%-5d %s%s\n", st.N, st.Note, reused)
			}
		}
		sw, okS := rep.Search["swim"]
		ml, okM := rep.Search["memberlist"]
		if okS && okM && ml.Largest > 0 {
			cut := func(s search) bool { return !strings.HasPrefix(s.Stopped, "not stable") }
			more := ""
			switch {
			case cut(ml):
				more = " (memberlist's search was cut off too: no bound on the ratio)"
			case cut(sw):
				more = " (at least: swim's search was cut off)"
			}
			fmt.Fprintf(w, "  ratio swim/memberlist: %.1fx%s\n", float64(sw.Largest)/float64(ml.Largest), more)
		}
	}
	printTargets(w, rep, passes)
}

// ranPass reports whether any run of the report used settings.
func ranPass(rep *report, settings string) bool {
	for i := range rep.Results {
		if rep.Results[i].Settings == settings {
			return true
		}
	}
	return false
}

// printEncryptionCost sets each library's encrypted steady state against
// its plaintext one at the same N.
func printEncryptionCost(w io.Writer, rep *report) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "cost of encryption and a label (LAN defaults; steady-state window):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "library\tN\tmetric\tplaintext\tencrypted\tencrypted/plaintext\t")
	rows := []struct {
		name string
		get  func(r *result) cell
	}{
		{"CPU per node", func(r *result) cell { return steadyCell(r, num("%.3f ms/s", r.CPUMsPerNodeSec)) }},
		{"bytes sent per node", func(r *result) cell { return steadyCell(r, num("%.0f B/s", r.BytesPerNodeSec)) }},
		{"bytes per UDP packet", func(r *result) cell {
			if r.PacketsNodeSec == 0 {
				return txt("n/a")
			}
			return steadyCell(r, num("%.1f B", r.UDPBytesNodeSec/r.PacketsNodeSec))
		}},
		{"packets sent per node", func(r *result) cell { return steadyCell(r, num("%.2f /s", r.PacketsNodeSec)) }},
		{"false deaths, all phases", func(r *result) cell {
			return falseCell(r.FalseBoot+r.FalseSteady+r.FalseCrash+r.FalseLoss, r.FalseBootWho+r.FalseSteadyWho+r.FalseCrashWho+r.FalseLossWho)
		}},
	}
	for _, l := range rep.Libraries {
		for _, n := range rep.Sizes {
			plain, enc := find(rep.Results, l, settingsLAN, n), find(rep.Results, l, settingsEncrypted, n)
			if enc == nil {
				continue
			}
			for _, m := range rows {
				a, b := get(metric(m), plain), get(metric(m), enc)
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", l, n, m.name, a.text, b.text, ratio(b, a))
			}
		}
	}
	tw.Flush()
}

func largestText(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

func get(m metric, r *result) cell {
	if r == nil {
		return txt("-")
	}
	if r.Error != "" {
		return txt("error")
	}
	return m.get(r)
}

func ratio(a, b cell) string {
	if !a.num || !b.num || b.val == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a.val/b.val)
}

// printTargets states, per size, where swim stands against the targets of
// issue 5.
func printTargets(w io.Writer, rep *report, passes []string) {
	type target struct {
		name string
		// check returns "met", "missed" or "n/a", with the ratio.
		check func(n int, sw, ml *result) string
	}
	ratioCheck := func(limit float64, get func(r *result) (float64, bool)) func(int, *result, *result) string {
		return func(_ int, sw, ml *result) string {
			a, okA := get(sw)
			b, okB := get(ml)
			switch {
			case okA && !okB:
				return "met (memberlist did not get there)"
			case !okA && okB:
				return "missed (swim did not get there)"
			case !okA || !okB || b == 0:
				return "n/a"
			}
			st := "met"
			if a/b > limit {
				st = "MISSED"
			}
			return fmt.Sprintf("%s (%.2fx, target ≤ %.2gx)", st, a/b, limit)
		}
	}
	boot := func(r *result) (float64, bool) { return r.BootSeconds, r.Converged }
	steady := func(f func(r *result) float64) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) { return f(r), r.Error == "" }
	}
	crash := func(r *result) (float64, bool) { return r.CrashMax, r.CrashRun && r.CrashComplete }
	targets := []target{
		{"bootstrap ≤ 0.5x", ratioCheck(0.5, boot)},
		{"CPU/node ≤ 0.5x", ratioCheck(0.5, steady(func(r *result) float64 { return r.CPUMsPerNodeSec }))},
		{"bytes/node ≤ 0.5x", ratioCheck(0.5, steady(func(r *result) float64 { return r.BytesPerNodeSec }))},
		{"heap/node ≤ 1x", ratioCheck(1, steady(func(r *result) float64 { return r.HeapPerNode }))},
		{"crash, all know (max) ≤ 0.65x at 64, 0.5x from 256", func(n int, sw, ml *result) string {
			limit := 0.5
			if n < 256 {
				limit = 0.65
			}
			return ratioCheck(limit, crash)(n, sw, ml)
		}},
		{"zero false deaths where memberlist has zero", func(_ int, sw, ml *result) string {
			f := func(r *result) int { return r.FalseBoot + r.FalseSteady + r.FalseCrash + r.FalseLoss }
			switch {
			case f(ml) > 0:
				return fmt.Sprintf("n/a (memberlist %d, swim %d)", f(ml), f(sw))
			case f(sw) > 0:
				return fmt.Sprintf("MISSED (swim %d)", f(sw))
			}
			return "met"
		}},
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "targets (issue 5):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\tN")
	for _, p := range passes {
		fmt.Fprintf(tw, "\t%s", p)
	}
	fmt.Fprintln(tw, "\t")
	for _, t := range targets {
		for _, n := range rep.Sizes {
			fmt.Fprintf(tw, "%s\t%d", t.name, n)
			for _, p := range passes {
				sw, ml := pair(rep, p, n)
				s := "n/a"
				if sw != nil && ml != nil && sw.Error == "" && ml.Error == "" {
					s = t.check(n, sw, ml)
				}
				fmt.Fprintf(tw, "\t%s", s)
			}
			fmt.Fprintln(tw, "\t")
		}
	}
	tw.Flush()
	sw, okS := rep.Search["swim"]
	ml, okM := rep.Search["memberlist"]
	if okS && okM {
		st := "n/a"
		switch {
		case ml.Largest > 0 && sw.Largest >= 8*ml.Largest:
			st = fmt.Sprintf("met (%d vs %d)", sw.Largest, ml.Largest)
		case ml.Largest > 0:
			st = fmt.Sprintf("MISSED or not shown (%d vs %d: %.1fx; swim's search: %s)", sw.Largest, ml.Largest, float64(sw.Largest)/float64(ml.Largest), sw.Stopped)
		}
		fmt.Fprintf(w, "largest stable N ≥ 8x: %s\n", st)
	}
}

// printNotes says how to read the table.
func printNotes(w io.Writer, rep *report, matched bool) {
	var notes []string
	add := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	add("* measured on a cluster that had not converged (crash: over the survivors that had the member live when it crashed, the share given).")
	pace := ""
	if r := rep.Options["join-rate"]; r != "" && r != "0" {
		pace = fmt.Sprintf(", at most %s joins started a second", r)
	}
	add("bootstrap: members join through member 0, %s at a time%s; time from the first join until every member counts N live members.", rep.Options["join-par"], pace)
	add("steady state: a %.0f s window starting %s after convergence; CPU is the process's (getrusage) divided by N;"+
		" bytes are what each member's transport sent (UDP packets plus stream writes of both ends); heap and stacks are"+
		" the growth of HeapInuse and StackInuse since before the cluster started, after a forced GC, divided by N.", rep.Window, rep.Options["settle"])
	add("anti-entropy: both libraries push-pull full state with one member every 30 s × (ceil(log2 N − 5) + 1) (N > 32)." +
		" memberlist's first periodic exchange comes a whole interval after a random stagger (60-90 s after start at 64 members," +
		" 180-210 s at 1,024), swim's own 30-90 s after its two post-join exchanges (2-12 s after joining, before the window)," +
		" so the window shows the probe and gossip regime of both; the TCP row shows what streams did send.")
	add("swim's heap includes its event queue (Config.Events is set to watch for deaths): it grows with the backlog, up to EventBuffer %d events of %d B,"+
		" and holds 8 slots (%d B) at rest; memberlist calls its EventDelegate synchronously and queues nothing.", swimEventBuffer(), swimEventSize(), 8*swimEventSize())
	add("crash: 1%% of the members (at least one, never the seed) are shut down at once without leaving (their ports then refuse, as after a process crash);" +
		" per crashed member, the time until the last survivor reported it gone; p50 and max over the batch.")
	add("false deaths: (observer, member) reports of a running member as gone, with the distinct members in parentheses.")
	if w := rep.Options["crash-watch"]; w != "" && w != "0s" {
		add("crash phase: it goes on counting false deaths for %s after every survivor knew of the crash.", w)
	}
	if ranPass(rep, settingsEncrypted) {
		add("encrypted: every member of the library holds one fixed AES-256 key and the label %q (swim: Config.Security.Keys, Label; memberlist: SecretKey, Label);"+
			" both seal every packet and stream with AES-GCM and check the label. Bytes per UDP packet are UDP bytes over packets sent.", testLabel)
	}
	if rep.Loss > 0 {
		add("UDP loss: after the crash phase, %.0f%% of all UDP packets are dropped at the sender for %s (streams untouched).", 100*rep.Loss, rep.Options["loss-window"])
	}
	if matched {
		add("matched settings: swim gets memberlist.DefaultLANConfig's probe interval/timeout, indirect checks, suspicion mult and max-timeout mult," +
			" retransmit mult, gossip interval/nodes, gossip-to-the-dead time, push-pull interval, TCP timeout, UDP buffer size, awareness multiplier and TCP pings" +
			" (all equal to swim's own LAN defaults), and PauseTolerance 0, so that its suspicion timeout follows memberlist's formula" +
			" SuspicionMult × max(1, log10 N) × ProbeInterval instead of the 5 s pause tolerance. memberlist runs its LAN defaults in both passes" +
			" (its figures are those of the first pass).")
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}
