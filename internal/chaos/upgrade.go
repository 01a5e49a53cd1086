//go:build linux

package chaos

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SrcDirPrefix starts the name of the temporary directory that holds a
// checkout of an older commit (AddCheckout); the creating process's pid
// follows it, so that a later run can tell a checkout whose creator died
// from one in use.
const SrcDirPrefix = "swimchaos-src-"

// Checkout is a detached git worktree of one commit of a repository, in a
// temporary directory of its own.
type Checkout struct {
	Dir    string // the worktree: the repository's files at Commit
	Commit string // the full hash of the commit checked out

	repo string // the repository the worktree belongs to
	tmp  string // the temporary directory that holds Dir
}

// RepoRoot returns the top directory of the git repository (or worktree)
// that holds the current directory.
func RepoRoot() (string, error) {
	return git("", "rev-parse", "--show-toplevel")
}

// AddCheckout resolves rev (a commit, short or full, or a tag) in the
// repository at repo and adds a detached worktree of that commit in a new
// temporary directory ($TMPDIR/swimchaos-src-<pid>-*/src). Remove undoes
// both; CleanStaleCheckouts undoes what a run that died left.
func AddCheckout(repo, rev string) (*Checkout, error) {
	commit, err := git(repo, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		// A shallow clone (the default of some CI checkouts) holds the
		// tip only.
		return nil, fmt.Errorf("%q is no commit of the repository at %s (a shallow clone lacks the older ones: fetch the full history): %w", rev, repo, err)
	}
	tmp, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", SrcDirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "src")
	if _, err := git(repo, "worktree", "add", "--detach", dir, commit); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	return &Checkout{Dir: dir, Commit: commit, repo: repo, tmp: tmp}, nil
}

// Remove removes the worktree from its repository and deletes its
// temporary directory. It may be called more than once.
func (c *Checkout) Remove() error {
	if c.tmp == "" {
		return nil
	}
	var errs []error
	if _, err := git(c.repo, "worktree", "remove", "--force", c.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.tmp); err != nil {
		errs = append(errs, err)
	}
	c.tmp = ""
	return errors.Join(errs...)
}

// CleanStaleCheckouts removes the checkouts AddCheckout made for processes
// that no longer exist: each worktree from the repository at repo, then its
// temporary directory. It returns the directories removed.
func CleanStaleCheckouts(repo string) []string {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), SrcDirPrefix+"*-*"))
	var cleaned []string
	for _, m := range matches {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), SrcDirPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		// It fails when the worktree was never added or was removed
		// already; the directory goes either way.
		_, _ = git(repo, "worktree", "remove", "--force", filepath.Join(m, "src"))
		if os.RemoveAll(m) == nil {
			cleaned = append(cleaned, m)
		}
	}
	return cleaned
}

// BuildAgentAt compiles examples/agent of the repository whose root is
// moduleDir into the file bin, with the go.mod and go.sum of its tree and
// no go.work: in its own module (examples/agent/go.mod) where it has one,
// as in this tree, else in the root module, as in older commits.
func BuildAgentAt(goCmd, moduleDir, bin string) error {
	cmd := exec.Command(goCmd, "build", "-o", bin, "./examples/agent")
	cmd.Dir = moduleDir
	if _, err := os.Stat(filepath.Join(moduleDir, "examples", "agent", "go.mod")); err == nil {
		cmd = exec.Command(goCmd, "build", "-o", bin, ".")
		cmd.Dir = filepath.Join(moduleDir, "examples", "agent")
	}
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build examples/agent in %s: %w: %s", moduleDir, err, out)
	}
	return nil
}

// AgentRevision returns the VCS revision go build stamped into the binary
// bin ("" when it stamped none) and whether the tree it was built from had
// local changes.
func AgentRevision(bin string) (revision string, modified bool, err error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", false, fmt.Errorf("build info of %s: %w", bin, err)
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified, nil
}

// flagLine matches a flag's first line in the usage the flag package prints.
var flagLine = regexp.MustCompile(`(?m)^  -([^\s=]+)`)

// AgentFlags returns the names of the flags the agent binary bin defines,
// from the usage it prints for -h.
func AgentFlags(bin string) ([]string, error) {
	// -h makes the agent print its usage; older agents then exit with
	// status 1 (the flag package's ErrHelp is an error to them), newer
	// ones with 0, so the status says nothing; the usage does.
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	var names []string
	for _, m := range flagLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s -h printed no flags: %s", bin, lastLines(out, 5))
	}
	return names, nil
}

// Restart starts agent a again from the binary bin, under the same name,
// port and uid, joining through seed; its previous process must have
// exited. The previous process's events stay in the log, but its views are
// forgotten (EventLog.ForgetViews), so that Converged waits for the new
// process's own.
func (c *Cluster) Restart(a *Agent, bin, seed string) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("restart %s: the cluster is closed", a.Name)
	}
	if a.cmd == nil {
		return fmt.Errorf("restart %s: it was never started", a.Name)
	}
	if !a.Exited() {
		return fmt.Errorf("restart %s: its process (pid %d) still runs", a.Name, a.cmd.Process.Pid)
	}
	// The previous process's reader has closed its done channel and ended,
	// so nothing else touches these fields now.
	a.done, a.err = make(chan struct{}), nil
	c.Log.ForgetViews(a.Name)
	if err := c.start(a, bin, seed); err != nil {
		// No new process: a stays exited, as Close expects.
		a.err = err
		close(a.done)
		return err
	}
	return nil
}

// ReadySince reports whether a printed its ready line at since or later,
// by the suite's clock (when the line was read).
func (c *Cluster) ReadySince(a *Agent, since time.Time) bool {
	_, ok := c.Log.First(func(e Event) bool {
		return e.Observer == a.Name && e.Ev == "ready" && !e.Arrived.Before(since)
	})
	return ok
}

// Wait waits up to within for the agent's process to end, and returns
// whether it ended and, if it did, the error its Wait returned (nil for
// exit status 0).
func (a *Agent) Wait(within time.Duration) (exited bool, err error) {
	select {
	case <-a.done:
		return true, a.err
	case <-time.After(within):
		return false, nil
	}
}

// git runs git with args in dir ("" for the current directory) and returns
// its output, trimmed.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(bytes.TrimSpace(out)), nil
}
