package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tiny is a grid small enough for the race detector: 12 members, one
// seed, 30 virtual seconds, no loss (so that a false death can only come
// from a pause).
func tiny(svg string, extra ...string) []string {
	args := []string{"-n", "12", "-seeds", "1", "-duration", "30s", "-loss", "0",
		"-p50", "1ms", "-p99", "5ms", "-parallel", "2", "-svg", svg}
	return append(args, extra...)
}

// row is one table row as printed.
type row struct {
	marked        bool
	k             int
	tolerance     time.Duration
	suspicionMult int
	verdict       string
}

// rowRE matches a table row: an optional "*", k, "3s (1.5x)",
// SuspicionMult, and the budget verdict at the end.
var rowRE = regexp.MustCompile(`^\s*(\*?)\s*(\d+)\s+(\S+) \([\d.]+x\)\s+(\d+)\s.*\s(ok|over)$`)

func parseRows(t *testing.T, out string) []row {
	t.Helper()
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[2])
		tol, err := time.ParseDuration(m[3])
		if err != nil {
			t.Fatalf("row %q: tolerance: %v", line, err)
		}
		sm, _ := strconv.Atoi(m[4])
		rows = append(rows, row{marked: m[1] == "*", k: k, tolerance: tol, suspicionMult: sm, verdict: m[5]})
	}
	return rows
}

// svgDoc is the part of the plot the test checks: the points, wherever
// they are nested.
type svgDoc struct {
	XMLName xml.Name    `xml:"svg"`
	Circles []svgCircle `xml:",any"`
}

type svgCircle struct {
	XMLName xml.Name
	Class   string      `xml:"class,attr"`
	Nested  []svgCircle `xml:",any"`
}

// points counts the circles of each class in the plot, after checking that
// it is well-formed XML from start to end.
func points(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("plot not written: %v", err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
	}
	var doc svgDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("plot: %v", err)
	}
	counts := map[string]int{}
	var walk func([]svgCircle)
	walk = func(cs []svgCircle) {
		for _, c := range cs {
			if c.XMLName.Local == "circle" {
				counts[c.Class]++
			}
			walk(c.Nested)
		}
	}
	walk(doc.Circles)
	return counts
}

// TestTuneRecommends runs the tool on a 2×2 grid whose tolerances are twice
// the pause: nothing should die, so a setting is recommended, its Config
// lines are printed (and are Go), and the plot has one point per setting.
func TestTuneRecommends(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "tune.svg")
	var stdout, stderr bytes.Buffer
	err := run(tiny(svg, "-pause", "2s", "-k", "1,3", "-tol", "1.5,2"), &stdout, &stderr)
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	rows := parseRows(t, out)
	want := map[row]bool{}
	for _, k := range []int{1, 3} {
		for _, tol := range []time.Duration{3 * time.Second, 4 * time.Second} {
			want[row{k: k, tolerance: tol, suspicionMult: 4}] = true
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d table rows, want %d", len(rows), len(want))
	}
	var best *row
	for i, r := range rows {
		key := r
		key.marked, key.verdict = false, ""
		if !want[key] {
			t.Errorf("unexpected or repeated row %+v", r)
		}
		delete(want, key)
		if r.marked {
			if best != nil {
				t.Errorf("two rows marked: %+v and %+v", *best, r)
			}
			best = &rows[i]
		}
	}
	if best == nil {
		t.Fatal("no row marked as recommended")
	}
	if best.verdict != "ok" {
		t.Errorf("the recommended row does not meet the budget: %+v", *best)
	}

	// The Config lines name the marked row's values, and compile as Go.
	if !strings.Contains(out, "recommended (*): ") {
		t.Error("no recommendation line")
	}
	var code []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "\tcfg") {
			code = append(code, strings.TrimSpace(line))
		}
	}
	wantCode := []string{
		"cfg := swim.DefaultLANConfig()",
		"cfg.IndirectChecks = " + strconv.Itoa(best.k),
		"cfg.PauseTolerance = " + goDuration(best.tolerance),
		"cfg.SuspicionMult = " + strconv.Itoa(best.suspicionMult),
	}
	if strings.Join(code, "\n") != strings.Join(wantCode, "\n") {
		t.Errorf("Config lines:\n%s\nwant:\n%s", strings.Join(code, "\n"), strings.Join(wantCode, "\n"))
	}
	src := "package p\nimport (\"time\"; \"swim\")\nfunc f() {\n" + strings.Join(code, "\n") + "\n_ = cfg\n_ = time.Second\n_ = swim.X\n}\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "config.go", src, 0); err != nil {
		t.Errorf("the Config lines are not Go: %v", err)
	}

	got := points(t, svg)
	if got["setting"] != 4 || got["best"] != 1 {
		t.Errorf("plot has %d setting points and %d recommended rings, want 4 and 1", got["setting"], got["best"])
	}
	if !strings.Contains(stderr.String(), "4/4 runs done") {
		t.Error("no progress line reporting 4/4 runs")
	}
}

// TestTuneNoSettingMeetsBudget: with a tolerance of a quarter of the pause
// and no confirmations to wait for (SuspicionMult 2), every pause kills, so
// no setting meets the budget; the tool says so, recommends nothing, and
// still plots every setting.
func TestTuneNoSettingMeetsBudget(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "tune.svg")
	var stdout, stderr bytes.Buffer
	err := run(tiny(svg, "-pause", "4s", "-k", "1,2", "-tol", "0.25", "-smult", "2"), &stdout, &stderr)
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	if !errors.Is(err, errNoneMeets) {
		t.Fatalf("run returned %v, want errNoneMeets", err)
	}
	rows := parseRows(t, out)
	if len(rows) != 2 {
		t.Fatalf("%d table rows, want 2", len(rows))
	}
	for _, r := range rows {
		if r.marked || r.verdict != "over" {
			t.Errorf("row %+v: every row should be over the budget and none marked", r)
		}
	}
	if !strings.Contains(out, "no setting meets the budget") {
		t.Error("no 'no setting meets the budget' message")
	}
	if strings.Contains(out, "recommended") || strings.Contains(out, "cfg :=") {
		t.Error("a recommendation was printed although nothing meets the budget")
	}
	got := points(t, svg)
	if got["setting"] != 2 || got["best"] != 0 {
		t.Errorf("plot has %d setting points and %d recommended rings, want 2 and 0", got["setting"], got["best"])
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-h"}, &stdout, &stderr); !errors.Is(err, errHelp) {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(stderr.String(), "-pause duration") {
		t.Errorf("-h does not list the flags:\n%s", stderr.String())
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "3"}, "-n must be at least 8"},
		{[]string{"-loss", "1"}, "-loss must be in [0, 1)"},
		{[]string{"-loss", "-0.1"}, "-loss must be in [0, 1)"},
		{[]string{"-p50", "0s"}, "-p50 must be positive"},
		{[]string{"-p50", "10ms", "-p99", "5ms"}, "-p99 (5ms) must be at least -p50 (10ms)"},
		{[]string{"-pause", "0s"}, "-pause must be positive"},
		{[]string{"-budget", "-1"}, "-budget must be a rate >= 0"},
		{[]string{"-seeds", "0"}, "-seeds must be at least 1"},
		{[]string{"-duration", "5s"}, "-duration must be at least 10s"},
		{[]string{"-parallel", "0"}, "-parallel must be at least 1"},
		{[]string{"-profile", "moon"}, `-profile must be lan, wan or local, is "moon"`},
		{[]string{"-k", "1,x"}, `-k: "x" is not an integer`},
		{[]string{"-k", "1,1"}, "-k: 1 is listed twice"},
		{[]string{"-k", "-1"}, "-k: -1 is out of range"},
		{[]string{"-tol", "0"}, "-tol: 0 is out of range"},
		{[]string{"-smult", "0"}, "-smult: 0 is out of range"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
		{[]string{"-duration", "20s", "-pause", "10s"}, "-duration 20s is too short for one crash and its pauses"},
		// Every tolerance below ProbeInterval (1s): nothing to try.
		{[]string{"-pause", "500ms", "-tol", "1,1.5"}, "every tolerance is below ProbeInterval"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(append(tc.args, "-svg", ""), &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: err %v, want a usage error", tc.args, err)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr does not say %q:\n%s", tc.args, tc.want, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: printed a report:\n%s", tc.args, stdout.String())
		}
	}
}

// TestGridDropsShortTolerances: a tolerance below ProbeInterval is left out
// with a warning, the others stay.
func TestGridDropsShortTolerances(t *testing.T) {
	o, err := parseFlags([]string{"-pause", "2s", "-tol", "0.25,1", "-k", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	grid, warnings := o.grid()
	if len(grid) != 1 || grid[0].Tolerance != 2*time.Second || len(warnings) != 1 {
		t.Fatalf("grid %v, warnings %q", grid, warnings)
	}
}

// TestSchedule checks the shape of the faults: the same for every setting
// (it depends on the seed only), nobody paused while a crash is being
// detected, every pause over before the next crash, crash victims never
// paused.
func TestSchedule(t *testing.T) {
	o, err := parseFlags([]string{"-n", "1000", "-pause", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	faults := schedule(o, 7)
	crashed := map[string]bool{}
	var crashes []time.Duration
	pauses := 0
	for _, f := range faults {
		if f.crash {
			crashed[f.member] = true
			crashes = append(crashes, f.at)
		}
	}
	for _, f := range faults {
		if f.crash {
			continue
		}
		pauses++
		if crashed[f.member] {
			t.Errorf("crash victim %s is also paused", f.member)
		}
		if f.length != o.pause {
			t.Errorf("pause of %v, want %v", f.length, o.pause)
		}
		if f.latest < f.at {
			t.Errorf("pause at %v may start at the latest at %v", f.at, f.latest)
		}
		for i, c := range crashes {
			if f.at >= c && f.at < c+o.detectWindow() {
				t.Errorf("pause at %v falls in the detection window of the crash at %v", f.at, c)
			}
			if f.latest < c && f.latest+f.length > c {
				t.Errorf("pause at %v (%v, at the latest %v) may run into the crash at %v", f.at, f.length, f.latest, c)
			}
			if i == len(crashes)-1 && f.at+f.length > o.duration {
				t.Errorf("pause at %v ends after the window", f.at)
			}
		}
	}
	if len(crashes) < 2 || pauses < 20*len(crashes) {
		t.Errorf("%d crashes and %d pauses in %v", len(crashes), pauses, o.duration)
	}
	if again := schedule(o, 7); len(again) != len(faults) || again[len(again)-1] != faults[len(faults)-1] {
		t.Error("the schedule is not a function of the seed")
	}
}

// TestChoose: the budget and missed crashes disqualify; the fastest p99
// wins, then p50, then fewer false suspicions.
func TestChoose(t *testing.T) {
	mk := func(p99, p50 time.Duration, deaths, susp float64, missed int) outcome {
		o := outcome{deathRate: deaths, suspicionRate: susp, missed: missed, crashes: 4}
		o.detect.N, o.detect.P99, o.detect.P50 = 4, p99, p50
		return o
	}
	s := time.Second
	outs := []outcome{
		mk(3*s, 2*s, 0.1, 1, 0), // fastest, over budget
		mk(4*s, 3*s, 0, 1, 1),   // a crash missed
		mk(5*s, 4*s, 0, 2, 0),
		mk(5*s, 3*s, 0, 2, 0), // better p50
		mk(5*s, 3*s, 0, 1, 0), // fewer false suspicions: the one
		mk(6*s, 1*s, 0, 0, 0),
	}
	if got := choose(outs, 0.01); got != 4 {
		t.Errorf("choose picked %d, want 4", got)
	}
	want := []bool{false, false, true, true, true, true}
	for i := range outs {
		if outs[i].meets != want[i] {
			t.Errorf("outcome %d meets = %v, want %v", i, outs[i].meets, want[i])
		}
	}
	if got := choose(outs, 0.2); got != 0 {
		t.Errorf("with a larger budget choose picked %d, want 0", got)
	}
	if got := choose(outs[:2], 0); got != -1 {
		t.Errorf("choose picked %d when nothing meets the budget", got)
	}
}

func TestGoDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		3 * time.Second:         "3 * time.Second",
		3750 * time.Millisecond: "3750 * time.Millisecond",
		time.Second:             "time.Second",
		90 * time.Second:        "90 * time.Second",
		2 * time.Minute:         "2 * time.Minute",
		1500 * time.Microsecond: "1500 * time.Microsecond",
		7:                       "time.Duration(7)",
	} {
		if got := goDuration(d); got != want {
			t.Errorf("goDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestNiceAxis(t *testing.T) {
	a := niceAxis(3.4, 5.6)
	if a.lo != 3 || a.hi != 6 || a.step != 0.5 {
		t.Errorf("niceAxis(3.4, 5.6) = %+v", a)
	}
	if got := tickLabel(0.30000000000000004, 0.1); got != "0.3" {
		t.Errorf("tickLabel = %q", got)
	}
}
