//go:build linux

package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// NamespacePrefix starts the name of every namespace the suite creates; the
// creating process's pid follows it ("swimchaos-1234"), so a later run can
// tell a namespace whose creator died from one in use.
const NamespacePrefix = "swimchaos-"

// EnsureTools makes sure the commands the suite runs are on PATH: ip
// (iproute2), nft (nftables) and setpriv (util-linux). It installs the
// missing ones with apt-get, and only those; log receives what it does.
func EnsureTools(log func(format string, args ...any)) error {
	var pkgs []string
	for _, tool := range []struct{ cmd, pkg string }{
		{"ip", "iproute2"},
		{"nft", "nftables"},
		{"setpriv", "util-linux"},
	} {
		if _, err := exec.LookPath(tool.cmd); err != nil {
			pkgs = append(pkgs, tool.pkg)
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	// ip and nft come together, as the suite's documentation says.
	if slices.Contains(pkgs, "iproute2") || slices.Contains(pkgs, "nftables") {
		pkgs = slices.DeleteFunc(pkgs, func(p string) bool { return p == "iproute2" || p == "nftables" })
		pkgs = append(pkgs, "nftables", "iproute2")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing packages %v and no apt-get to install them", pkgs)
	}
	log("installing %v with apt-get", pkgs)
	install := func() error {
		cmd := exec.Command("apt-get", append([]string{"install", "-y", "-qq"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install %v: %w: %s", pkgs, err, lastLines(out, 5))
		}
		return nil
	}
	if err := install(); err != nil {
		// The package lists may be missing or stale: refresh them once.
		log("%v; running apt-get update", err)
		if out, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update: %w: %s", err, lastLines(out, 5))
		}
		if err := install(); err != nil {
			return err
		}
	}
	for _, cmd := range []string{"ip", "nft", "setpriv"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s still missing after installing %v", cmd, pkgs)
		}
	}
	return nil
}

// Namespace is a network namespace created by the suite.
type Namespace struct {
	Name string
}

// NewNamespace creates the namespace NamespacePrefix+pid of this process
// and brings its loopback up. A namespace of that name left by an earlier
// process that had the same pid is removed first.
func NewNamespace() (*Namespace, error) {
	ns := &Namespace{Name: NamespacePrefix + strconv.Itoa(os.Getpid())}
	if exists(ns.Name) {
		if err := ns.Delete(); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %w: %s", ns.Name, err, bytes.TrimSpace(out))
	}
	if out, err := ns.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("ip netns exec %s ip link set lo up: %w: %s", ns.Name, err, bytes.TrimSpace(out))
	}
	return ns, nil
}

// Command returns a command that runs name with args inside the namespace
// (`ip netns exec`, which execs it: the process started is the command
// itself, so signals sent to it reach the command).
func (ns *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Nft runs an nft script inside the namespace (`nft -f -`).
func (ns *Namespace) Nft(script string) error {
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f - in %s: %w: %s\nscript:\n%s", ns.Name, err, bytes.TrimSpace(out), script)
	}
	return nil
}

// NftOutput runs nft with args inside the namespace and returns its output.
func (ns *Namespace) NftOutput(args ...string) (string, error) {
	out, err := ns.Command("nft", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft %s in %s: %w: %s", strings.Join(args, " "), ns.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Delete kills whatever processes still run in the namespace (SIGCONT
// first, for stopped ones, then SIGKILL) and deletes it.
func (ns *Namespace) Delete() error {
	killAll(ns.Name)
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil && exists(ns.Name) {
		return fmt.Errorf("ip netns del %s: %w: %s", ns.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

// CleanStaleNamespaces deletes the namespaces named NamespacePrefix+pid
// whose creating process no longer exists, with the processes still in
// them (left by a run that was killed before its cleanup), and returns
// their names.
func CleanStaleNamespaces() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var cleaned []string
	var errs []error
	for _, l := range strings.Split(string(out), "\n") {
		fields := strings.Fields(l) // "swimchaos-1234 (id: 0)"
		if len(fields) == 0 || !strings.HasPrefix(fields[0], NamespacePrefix) {
			continue
		}
		name := fields[0]
		pid, err := strconv.Atoi(strings.TrimPrefix(name, NamespacePrefix))
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		if err := (&Namespace{Name: name}).Delete(); err != nil {
			errs = append(errs, err)
			continue
		}
		cleaned = append(cleaned, name)
	}
	return cleaned, errors.Join(errs...)
}

// BinDirPrefix starts the name of the temporary directory the suite builds
// the agent into; the creating process's pid follows it.
const BinDirPrefix = "swimchaos-bin-"

// NewBinDir creates a directory for the agent binary under dir ("" for the
// default temporary directory), readable and searchable by every uid (the
// agents run under uids of their own).
func NewBinDir(dir string) (string, error) {
	d, err := os.MkdirTemp(dir, fmt.Sprintf("%s%d-", BinDirPrefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o755); err != nil {
		_ = os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// CleanStaleBinDirs removes the directories NewBinDir made under dir ("" for
// the default temporary directory) for processes that no longer exist.
func CleanStaleBinDirs(dir string) []string {
	if dir == "" {
		dir = os.TempDir()
	}
	matches, _ := filepath.Glob(filepath.Join(dir, BinDirPrefix+"*-*"))
	var cleaned []string
	for _, m := range matches {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), BinDirPrefix), "-")
		if pid, err := strconv.Atoi(pidStr); err == nil && pid > 0 && !processExists(pid) {
			if os.RemoveAll(m) == nil {
				cleaned = append(cleaned, m)
			}
		}
	}
	return cleaned
}

// killAll sends SIGCONT, then SIGKILL, to every process in the namespace.
func killAll(name string) {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// exists reports whether a namespace of that name is mounted.
func exists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

// processExists reports whether a process with that pid exists.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// lastLines returns the last n lines of out, for error messages.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
