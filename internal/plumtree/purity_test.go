package plumtree

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The package is pure, as the Machine that drives it: no I/O, no lock, no
// clock, no goroutine, no channel, no random source but a *rand.Rand it
// would be given. The
// compiler keeps the Machine's state out of reach; these checks keep the
// rest out.

// forbidden are the imports that would give the package I/O, shared state
// or randomness of its own.
var forbidden = map[string]bool{
	"net": true, "net/http": true, "os": true, "sync": true, "sync/atomic": true,
	"math/rand": true, "crypto/rand": true, "runtime": true,
}

// randAllowed are the names of math/rand/v2 a package given a *rand.Rand
// may use: the type, and building one in tests of its own.
var randAllowed = map[string]bool{"Rand": true, "New": true, "NewPCG": true}

// clockFuncs read the clock or arm a timer.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// impurities lists what the files do that the package must not.
func impurities(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+what)
	}
	for _, f := range files {
		names := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbidden[p] {
				report(imp, "imports "+p)
			}
			name := path.Base(p)
			if p == "math/rand/v2" {
				name = "rand"
			}
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				report(n, "starts a goroutine")
			case *ast.ChanType:
				report(n, "uses a channel")
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.Ident)
				switch {
				case !ok:
				case names[x.Name] == "time" && clockFuncs[n.Sel.Name]:
					report(n, "calls time."+n.Sel.Name)
				case names[x.Name] == "math/rand/v2" && !randAllowed[n.Sel.Name]:
					report(n, "draws from the global random source (rand."+n.Sel.Name+")")
				}
			}
			return true
		})
	}
	sort.Strings(out)
	return out
}

// parseDir parses the package's non-test files, and extra (name ->
// source).
func parseDir(t *testing.T, extra map[string]string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for name, src := range extra {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

func TestPackageIsPure(t *testing.T) {
	if bad := impurities(parseDir(t, nil)); len(bad) > 0 {
		t.Errorf("the package must stay pure:\n%s", strings.Join(bad, "\n"))
	}
}

// TestPurityCheckCatches: the check finds each kind of impurity in an
// added file, so that its passing means something.
func TestPurityCheckCatches(t *testing.T) {
	bad := impurities(parseDir(t, map[string]string{"impure.go": `package plumtree

import (
	"math/rand/v2"
	"os"
	"sync"
	clock "time"
)

var mu sync.Mutex

func impure() {
	_ = clock.Now()
	_ = rand.IntN(3)
	_ = rand.New(rand.NewPCG(1, 2)) // allowed: building a source to be given
	_, _ = os.Getwd()
	go func() {}()
	_ = make(chan int)
}
`}))
	var got []string
	for _, b := range bad {
		if strings.HasPrefix(b, "impure.go:") {
			got = append(got, b[strings.LastIndex(b, ": ")+2:])
		}
	}
	want := []string{"calls time.Now", "draws from the global random source (rand.IntN)", "imports os", "imports sync", "starts a goroutine", "uses a channel"}
	sort.Strings(got)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the check found %q, want %q", got, want)
	}
}
