// Package script reads and runs the datadriven test scripts of this
// module, in the manner of etcd raft's interaction tests: a command is a
// directive line, optional input lines, a line "----" and the output the
// command must print, ended by a blank line; lines starting with # between
// commands are comments. The root package's protocol scenarios
// (testdata/scenarios) and internal/plumtree's scripts share it; each
// brings its own commands.
package script

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Block is one command of a script, with the comment and blank lines
// before it kept as written.
type Block struct {
	Lead  []string
	Line  int // the directive's line number
	Cmd   string
	Input []string
	Want  []string
}

// Parse splits a script into its commands; trailing holds the comment and
// blank lines after the last one.
func Parse(data string) (blocks []*Block, trailing []string, err error) {
	lines := strings.Split(strings.TrimRight(data, "\n"), "\n")
	for i := 0; i < len(lines); {
		b := &Block{}
		for i < len(lines) && (strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(strings.TrimSpace(lines[i]), "#")) {
			b.Lead = append(b.Lead, lines[i])
			i++
		}
		if i == len(lines) {
			return blocks, b.Lead, nil
		}
		b.Line, b.Cmd = i+1, lines[i]
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			b.Input = append(b.Input, lines[i])
		}
		if i == len(lines) {
			return nil, nil, fmt.Errorf("line %d: %q has no ---- line", b.Line, b.Cmd)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			b.Want = append(b.Want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, nil, nil
}

// Run runs the commands of the script at path in order through exec and
// compares what each prints with its expected output, or, with rewrite,
// writes the output into the file instead (then read the diff: it is the
// change of behaviour). A command's output may not hold a blank line,
// which would end it.
func Run(t *testing.T, path string, rewrite bool, exec func(cmd string, input []string) ([]string, error)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, trailing, err := Parse(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, b := range blocks {
		got, err := exec(b.Cmd, b.Input)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, b.Line, b.Cmd, err)
		}
		for _, l := range got {
			if strings.TrimSpace(l) == "" {
				t.Fatalf("%s:%d: %s printed a blank line, which would end its output", path, b.Line, b.Cmd)
			}
		}
		if rewrite {
			out = append(out, b.Lead...)
			out = append(out, b.Cmd)
			out = append(out, b.Input...)
			out = append(out, "----")
			out = append(out, got...)
			continue
		}
		if want := strings.Join(b.Want, "\n"); want != strings.Join(got, "\n") {
			t.Errorf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, b.Line, b.Cmd, want, strings.Join(got, "\n"))
		}
	}
	if rewrite {
		out = append(out, trailing...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
