//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The browser test of the live page (-http): a headless Chromium loads an
// agent's page, runs its JavaScript against the agent and dumps the DOM it
// built, which the test reads. It runs in `make test` and `make ui-test`,
// which install Chromium first when it is missing (apt-get, as root), and
// set SWIM_UI_TEST=require. Without a browser the test skips with a
// message saying how to run it, so that `go test ./...` passes on a
// machine with only Go; it fails instead when SWIM_UI_TEST=require or CI
// is set, so that a missing browser cannot pass for a green run there.
// SWIM_UI_TEST=skip always skips it. SWIM_CHROMIUM names the browser
// binary (default: the first of chromium, chromium-browser, google-chrome
// on PATH). Screenshots go to $UI_ARTIFACTS, or testdata-out/ beside this
// file; the test logs their paths.

// uiBudget is the page's virtual time in each browser run: its first poll
// of /members and /events, and one more. Network waits do not count.
const uiBudget = "1500"

// findChromium returns the browser binary. With none, it skips the test,
// or fails it where the browser test is required (see above).
func findChromium(t *testing.T) string {
	t.Helper()
	mode := os.Getenv("SWIM_UI_TEST")
	if mode == "skip" {
		t.Skip("SWIM_UI_TEST=skip")
	}
	if p := os.Getenv("SWIM_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no headless browser: install chromium (`make ui-test` does, as root, with apt-get)" +
		" or name one with SWIM_CHROMIUM, then run `make ui-test`"
	if mode == "require" || os.Getenv("CI") != "" {
		t.Fatal(how + " (the browser test is required here: SWIM_UI_TEST=require or CI is set)")
	}
	t.Skip(how)
	return ""
}

// browser runs headless Chromium against pages of the agents.
type browser struct {
	t       *testing.T
	bin     string
	profile string // a user data directory of its own: runs never share one
}

func (b *browser) run(args ...string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + b.profile, "--virtual-time-budget=" + uiBudget,
	}, args...)
	cmd := exec.CommandContext(ctx, b.bin, all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(b.t, err, "%s: %s", b.bin, lastLinesOf(stderr.String(), 10))
	return stdout.Bytes()
}

// page is what the test reads of the page's DOM.
type page struct {
	refreshes  int               // successful polls of the agent
	err        string            // the page's report of a failed poll
	states     map[string]string // member -> state, from the member rows
	suspicions map[string]bool   // members in the suspicions table
	events     map[string]bool   // "kind node" of the events listed
	dom        string
}

var (
	reRefreshes = regexp.MustCompile(`<body[^>]* data-refreshes="(\d+)"`)
	reError     = regexp.MustCompile(`<body[^>]* data-error="([^"]*)"`)
	reMemberRow = regexp.MustCompile(`<tr data-member="([^"]*)" data-state="([^"]*)"`)
	reSuspect   = regexp.MustCompile(`<tr data-suspect="([^"]*)"`)
	reEvent     = regexp.MustCompile(`<tr data-event="([^"]*)" data-node="([^"]*)"`)
)

func (b *browser) load(url string) page {
	b.t.Helper()
	dom := string(b.run("--dump-dom", url))
	p := page{states: map[string]string{}, suspicions: map[string]bool{}, events: map[string]bool{}, dom: dom}
	if m := reRefreshes.FindStringSubmatch(dom); m != nil {
		_, _ = fmt.Sscan(m[1], &p.refreshes)
	}
	if m := reError.FindStringSubmatch(dom); m != nil {
		p.err = m[1]
	}
	for _, m := range reMemberRow.FindAllStringSubmatch(dom, -1) {
		p.states[m[1]] = m[2]
	}
	for _, m := range reSuspect.FindAllStringSubmatch(dom, -1) {
		p.suspicions[m[1]] = true
	}
	for _, m := range reEvent.FindAllStringSubmatch(dom, -1) {
		p.events[m[1]+" "+m[2]] = true
	}
	return p
}

// screenshot saves the page as a PNG in dir, checks that it decodes, and
// returns its path.
func (b *browser) screenshot(url, dir, name string) string {
	b.t.Helper()
	path := filepath.Join(dir, name)
	b.run("--window-size=1200,900", "--hide-scrollbars", "--screenshot="+path, url)
	f, err := os.Open(path)
	require.NoError(b.t, err, "no screenshot")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(b.t, err, "the screenshot is no PNG")
	require.Equal(b.t, 1200, img.Bounds().Dx())
	return path
}

// artifactDir is where the screenshots are kept after the test.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("UI_ARTIFACTS")
	if dir == "" {
		dir = "testdata-out"
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// httpAddr returns the address the agent's -http server listens on, from
// its http line.
func (p *process) httpAddr() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Ev == "http" {
			return l.Addr, true
		}
	}
	return "", false
}

// TestAgentPage: three agents on 127.0.0.1 with -http; the page of one
// shows all three alive; once one is killed (SIGKILL) it shows it suspect,
// with its suspicion in progress, then dead, and lists both events.
func TestAgentPage(t *testing.T) {
	chromium := findChromium(t)
	br := &browser{t: t, bin: chromium, profile: t.TempDir()}
	shots := t.TempDir()
	bin := buildAgent(t)

	// A pause tolerance of 8s keeps the victim suspect long enough for
	// several page loads and a screenshot (each starts a browser: 1.5 to
	// 3 seconds).
	args := []string{"-http", "127.0.0.1:0", "-pause-tolerance", "8s", "-meta", "role=test"}
	a, seed := startAgent(t, bin, "a", args...)
	b, _ := startAgent(t, bin, "b", append(args, "-join", seed)...)
	c, _ := startAgent(t, bin, "c", append(args, "-join", seed)...)
	// Each agent prints its http line once its server listens, which
	// need not be by the time another agent's line is out.
	for _, p := range []*process{a, b, c} {
		require.Eventually(t, func() bool {
			_, ok := p.httpAddr()
			return ok
		}, waitLong, pollEvery, "%s printed no http line", p.name)
	}
	web, _ := a.httpAddr()
	url := "http://" + web + "/"

	// waitPage loads the page until cond holds, and returns the last load.
	waitPage := func(what string, within time.Duration, cond func(page) bool) page {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			p := br.load(url)
			if cond(p) {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page did not show %s within %v: refreshes %d, error %q, members %v;\nDOM:\n%s",
					what, within, p.refreshes, p.err, p.states, p.dom)
			}
		}
	}

	start := time.Now()
	p := waitPage("three members alive", 30*time.Second, func(p page) bool {
		return p.states["a"] == "alive" && p.states["b"] == "alive" && p.states["c"] == "alive"
	})
	require.GreaterOrEqual(t, p.refreshes, 1)
	require.Empty(t, p.err)
	require.Len(t, p.states, 3, "a row per member, no more")
	require.True(t, p.events["join b"] && p.events["join c"], "the events list the joins: %v", p.events)
	t.Logf("page shows the cluster formed after %v", time.Since(start).Round(time.Millisecond))
	alive := br.screenshot(url, shots, "agent-page-alive.png")

	require.NoError(t, c.cmd.Process.Kill())
	killed := time.Now()
	var sawSuspicion bool
	p = waitPage("c suspect, with its suspicion in progress", 30*time.Second, func(p page) bool {
		if p.states["c"] == "dead" {
			t.Fatalf("c went from alive to dead with no page load showing it suspect: %v", p.states)
		}
		sawSuspicion = p.states["c"] == "suspect" && p.suspicions["c"]
		return sawSuspicion
	})
	t.Logf("page shows c suspect %v after the kill", time.Since(killed).Round(time.Millisecond))
	suspect := br.screenshot(url, shots, "agent-page-suspect.png")

	p = waitPage("c dead", 60*time.Second, func(p page) bool { return p.states["c"] == "dead" })
	t.Logf("page shows c dead %v after the kill", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, "alive", p.states["a"])
	require.Equal(t, "alive", p.states["b"])
	require.False(t, p.suspicions["c"], "a dead member has no suspicion in progress")
	require.True(t, p.events["suspect c"] && p.events["leave c"], "the events list the suspicion and the death: %v", p.events)
	dead := br.screenshot(url, shots, "agent-page-dead.png")

	keep := artifactDir(t)
	for _, s := range []string{alive, suspect, dead} {
		data, err := os.ReadFile(s)
		require.NoError(t, err)
		dst := filepath.Join(keep, filepath.Base(s))
		require.NoError(t, os.WriteFile(dst, data, 0o644))
		t.Logf("screenshot: %s", dst)
	}
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
