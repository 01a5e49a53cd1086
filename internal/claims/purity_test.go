package claims

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// impure lists what the package must not use: it is driven like the
// Machine (every input carries now, its randomness is injected), so it
// does no I/O, takes no lock, draws no global randomness and reads no
// clock.
var impure = map[string]bool{"net": true, "os": true, "sync": true, "math/rand": true, "math/rand/v2": true,
	"crypto/rand": true, "time.Now": true, "time.Since": true, "time.Until": true}

// impurities lists the impure imports and calls of the Go source files.
func impurities(t *testing.T, files map[string]string) []string {
	var found []string
	fset := token.NewFileSet()
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if impure[path] || strings.HasPrefix(path, "net/") || strings.HasPrefix(path, "os/") {
				found = append(found, name+": imports "+path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && impure[id.Name+"."+sel.Sel.Name] {
					found = append(found, name+": uses "+id.Name+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	return found
}

func TestPackageIsPure(t *testing.T) {
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	files := map[string]string{}
	for _, name := range names {
		if !strings.HasSuffix(name, "_test.go") {
			src, err := os.ReadFile(name)
			require.NoError(t, err)
			files[name] = string(src)
		}
	}
	require.NotEmpty(t, files)
	require.Empty(t, impurities(t, files))
}

// The check finds each kind of impurity.
func TestPurityCheckFinds(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"net", "package claims\nimport \"net\"\nvar _ net.IP"},
		{"os", "package claims\nimport \"os\"\nvar _ = os.Args"},
		{"sync", "package claims\nimport \"sync\"\nvar _ sync.Mutex"},
		{"global randomness", "package claims\nimport \"math/rand/v2\"\nvar _ = rand.Int"},
		{"clock", "package claims\nimport \"time\"\nvar _ = time.Now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, impurities(t, map[string]string{"x.go": tc.src}))
		})
	}
}
