package swim

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/script"
)

// The interpreter of the protocol scenarios in testdata/scenarios: the test,
// the reading of a file into commands and of a directive into arguments,
// and the table dispatching each command to its handler. The world the
// commands act on is in scenario_world_test.go, the messages' syntax in
// scenario_msgs_test.go, and the handlers (the cmd methods) in
// scenario_cmd_*_test.go, grouped by concern.

var scenRewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/scenarios/*.txt with what the scenarios print")

// TestScenarios runs the protocol scenarios in testdata/scenarios/*.txt,
// one subtest per file, in the manner of etcd raft's datadriven interaction
// tests. A file is a series of commands; each is a directive line, optional
// input lines, a line "----" and the output the command must print, ended
// by a blank line:
//
//	recv self from=stranger
//	suspect p001 inc=1 from=accuser
//	----
//	self event suspect: p001 suspect inc=1
//
// Lines starting with # between commands are comments. Everything runs on
// Machines through their public API, in virtual time from mtStart with
// seeded randomness, so the output is the same on every run. After a
// deliberate change of behaviour, regenerate the expected output and read
// the diff:
//
//	go test -run TestScenarios -rewrite
//	go test -run TestScenarios/probe -rewrite   # one file
//
// The commands are listed in testdata/scenarios/README.md and in
// scenCommands below.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScenarioFile(t, path)
		})
	}
}

// runScenarioFile runs the commands of one file in order, on one
// scenWorld, and compares what each prints with its expected output, or
// with -rewrite writes the output into the file instead.
func runScenarioFile(t *testing.T, path string) {
	script.Run(t, path, *scenRewrite, newScenWorld(t).exec)
}

// scenArgs are a directive's arguments: bare words and key=value pairs
// (values may be double-quoted). Every key must be used by the command, so
// that a misspelt one is an error rather than ignored.
type scenArgs struct {
	words []string
	kv    map[string]string
	used  map[string]bool
}

// parseScenArgs sorts a directive's tokens into words and key=value pairs.
func parseScenArgs(tokens []string) *scenArgs {
	a := &scenArgs{kv: map[string]string{}, used: map[string]bool{}}
	for _, tok := range tokens {
		if k, v, ok := strings.Cut(tok, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, tok)
		}
	}
	return a
}

// scenFields splits a line at spaces, keeping double-quoted parts (Go
// syntax) together and unquoted.
func scenFields(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			u, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("bad quote in %q: %w", s, err)
			}
			cur.WriteString(u)
			in = true
			i = j
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// get is the value of key k, taken (marked used).
func (a *scenArgs) get(k string) (string, bool) {
	v, ok := a.kv[k]
	if ok {
		a.used[k] = true
	}
	return v, ok
}

// str is the value of key k, def when it is absent.
func (a *scenArgs) str(k, def string) string {
	if v, ok := a.get(k); ok {
		return v
	}
	return def
}

// num is the value of key k as a number, def when it is absent.
func (a *scenArgs) num(k string, def uint64) (uint64, error) {
	v, ok := a.get(k)
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", k, v, err)
	}
	return n, nil
}

// list is the value of key k split at commas, nil when absent or empty.
func (a *scenArgs) list(k string) []string {
	v, ok := a.get(k)
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// flag reports whether the bare word w was given, and takes it.
func (a *scenArgs) flag(w string) bool {
	i := slices.Index(a.words, w)
	if i < 0 {
		return false
	}
	a.words = slices.Delete(a.words, i, i+1)
	return true
}

// check fails on keys no command used and on words left over.
func (a *scenArgs) check() error {
	for k := range a.kv {
		if !a.used[k] {
			return fmt.Errorf("unknown argument %s=", k)
		}
	}
	if len(a.words) > 0 {
		return fmt.Errorf("unexpected %q", a.words)
	}
	return nil
}

// scenCommands maps each directive to its implementation. The README in
// testdata/scenarios describes them.
var scenCommands = map[string]func(w *scenWorld, a *scenArgs, input []string) error{
	"new":         (*scenWorld).cmdNew,
	"peer":        (*scenWorld).cmdPeer,
	"reset":       (*scenWorld).cmdReset,
	"join":        (*scenWorld).cmdJoin,
	"join-start":  (*scenWorld).cmdJoinStart,
	"recv":        (*scenWorld).cmdRecv,
	"stream":      (*scenWorld).cmdStream,
	"reply":       (*scenWorld).cmdReply,
	"time":        (*scenWorld).cmdTime,
	"tick":        (*scenWorld).cmdTick,
	"next":        (*scenWorld).cmdNext,
	"deadline":    (*scenWorld).cmdDeadline,
	"run":         (*scenWorld).cmdRun,
	"deliver":     (*scenWorld).cmdDeliver,
	"drop":        (*scenWorld).cmdDrop,
	"heal":        (*scenWorld).cmdHeal,
	"members":     (*scenWorld).cmdMembers,
	"member":      (*scenWorld).cmdMember,
	"stats":       (*scenWorld).cmdStats,
	"health":      (*scenWorld).cmdHealth,
	"gossip":      (*scenWorld).cmdGossip,
	"settle":      (*scenWorld).cmdSettle,
	"leave":       (*scenWorld).cmdLeave,
	"leave-done":  (*scenWorld).cmdLeaveDone,
	"update-meta": (*scenWorld).cmdUpdateMeta,
	"broadcast":   (*scenWorld).cmdBroadcast,
	"delivered":   (*scenWorld).cmdDelivered,
	"identity":    (*scenWorld).cmdIdentity,
	"fields":      (*scenWorld).cmdFields,
	"restart":     (*scenWorld).cmdRestart,
}

// exec runs one command and returns what it printed.
func (w *scenWorld) exec(line string, input []string) ([]string, error) {
	tokens, err := scenFields(line)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("empty directive")
	}
	fn, ok := scenCommands[tokens[0]]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", tokens[0])
	}
	a := parseScenArgs(tokens[1:])
	w.out = nil
	w.sizes = a.flag("sizes")
	w.show = nil
	if kinds := a.list("show"); kinds != nil {
		w.show = map[string]bool{}
		for _, k := range kinds {
			if !slices.Contains([]string{"packets", "replies", "streams", "events", "messages"}, k) {
				return nil, fmt.Errorf("show=%s: not packets, replies, streams, events or messages", k)
			}
			w.show[k] = true
		}
	}
	if err := fn(w, a, input); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return w.out, nil
}
