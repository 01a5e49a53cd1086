package swim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// coreFiles are the files of the protocol core, the Machine: everything
// it does is a function of its inputs, now and its *rand.Rand (doc.go).
var coreFiles = []string{
	"machine.go", "lifecycle.go", "member.go", "probe.go", "suspicion.go",
	"incarnation.go", "pushpull.go", "broadcast.go", "table.go", "ring.go",
	"health.go", "timers.go", "usermsg.go", "ping.go", "admission.go", "partition.go",
	"deadlist.go", "holes.go", "observer.go",
}

// forbiddenImports would give the core I/O, shared state or randomness of
// its own.
var forbiddenImports = map[string]string{
	"net":         "I/O (net/netip, plain values, is fine)",
	"os":          "I/O",
	"sync":        "locks belong to the runtime",
	"sync/atomic": "shared state belongs to the runtime",
	"math/rand":   "the global random source (use the injected *rand.Rand)",
	"crypto/rand": "a random source other than the injected one",
	"runtime":     "the scheduler",
}

// forbiddenTimeFuncs read the clock or arm a timer.
var forbiddenTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// TestCoreIsPure parses the core's files and fails if one imports a
// package that does I/O or locking, reads the clock, starts a goroutine,
// uses a channel or draws from a global random source (DESIGN.md,
// principle 1).
func TestCoreIsPure(t *testing.T) {
	fset := token.NewFileSet()
	for _, name := range coreFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, v := range corePurityViolations(fset, f) {
			t.Errorf("%s", v)
		}
	}
}

// corePurityViolations lists what in f the core must not do.
func corePurityViolations(fset *token.FileSet, f *ast.File) []string {
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+what)
	}
	local := map[string]string{} // import name in this file -> path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := forbiddenImports[path]; bad {
			report(imp, "imports "+path+": "+why)
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if path == "math/rand/v2" {
			name = "rand"
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "starts a goroutine")
		case *ast.SelectStmt:
			report(n, "selects on channels")
		case *ast.SendStmt:
			report(n, "sends on a channel")
		case *ast.ChanType:
			report(n, "uses a channel")
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				break
			}
			switch local[pkg.Name] {
			case "time":
				if forbiddenTimeFuncs[sel.Sel.Name] {
					report(n, "calls time."+sel.Sel.Name)
				}
			case "math/rand/v2":
				if sel.Sel.Name != "New" && sel.Sel.Name != "NewPCG" {
					report(n, "draws from the global random source (rand."+sel.Sel.Name+")")
				}
			}
		}
		return true
	})
	return out
}

// TestCorePurityCheckCatches: the check finds each kind of violation in a
// file that has them, so a pass above means something.
func TestCorePurityCheckCatches(t *testing.T) {
	const src = `package swim

import (
	"math/rand/v2"
	"sync"
	"time"
)

var mu sync.Mutex

func impure() {
	_ = time.Now()
	_ = rand.IntN(3)
	go func() {}()
	c := make(chan int, 1)
	c <- 1
	select {
	case <-c:
	}
	_ = rand.New(rand.NewPCG(1, 2)) // allowed: building the injected source
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "impure.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	v := corePurityViolations(fset, f)
	require.Len(t, v, 7, "%q", v) // sync, time.Now, rand.IntN, go, chan, send, select
}
