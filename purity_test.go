package swim

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pureRooms are the packages of protocols with rules of their own that
// the Machine drives the way a driver drives the Machine (doc.go,
// "Layers"): every input carries now, every output is data. They are held
// to the core's rules whole, every file and declaration of theirs, not
// only what a seed reaches: nothing in them may do I/O, lock, read the
// clock, start a goroutine or draw randomness the Machine did not hand
// them.
var pureRooms = []string{"internal/claims", "internal/plumtree"}

// room is one package parsed and type-checked from its source.
type room struct {
	fset  *token.FileSet
	files map[string]*ast.File
	info  *types.Info
}

// loadRoom parses the non-test files of the package in dir, adds extra
// (base name -> source, for the self-test) and type-checks them.
func loadRoom(t *testing.T, dir string, extra map[string]string) *room {
	t.Helper()
	r := &room{fset: token.NewFileSet(), files: map[string]*ast.File{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var files []*ast.File
	add := func(name string, src any) {
		f, err := parser.ParseFile(r.fset, name, src, 0)
		require.NoError(t, err)
		r.files[filepath.Base(name)] = f
		files = append(files, f)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, "_test.go") {
			add(name, nil)
		}
	}
	require.NotEmpty(t, files, "no Go files in %s", dir)
	for name, src := range extra {
		add(name, src)
	}
	r.info = &types.Info{Uses: map[*ast.Ident]types.Object{}}
	layerImporterOnce.Do(func() { layerImporter = importer.ForCompiler(token.NewFileSet(), "source", nil) })
	conf := types.Config{Importer: layerImporter}
	_, err = conf.Check("github.com/swim-go/swim/"+filepath.ToSlash(dir), r.fset, files, r.info)
	require.NoError(t, err)
	return r
}

// impurities lists, file by file, what the room does that the core may
// not (layers_test.go: forbiddenImports, forbiddenTimeFuncs,
// inspectPurity).
func (r *room) impurities() []string {
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, r.fset.Position(n.Pos()).String()+": "+what)
	}
	for _, f := range r.files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbiddenImports[path]; bad {
				report(imp, "imports "+path+": "+why)
			}
		}
		for _, d := range f.Decls {
			inspectPurity(r.info, d, report)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestRoomsArePure: the packages the Machine drives do no I/O, take no
// lock, read no clock, start no goroutine, use no channel and draw
// randomness only from what the Machine passes them, as the core does
// (doc.go, "Layers").
func TestRoomsArePure(t *testing.T) {
	for _, dir := range pureRooms {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			require.Empty(t, loadRoom(t, dir, nil).impurities())
		})
	}
}

// TestRoomCheckCatches: added to each room, a file that does each
// forbidden thing once is found out at each, so that TestRoomsArePure's
// passing means something.
func TestRoomCheckCatches(t *testing.T) {
	for _, dir := range pureRooms {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pkg := filepath.Base(dir)
			clean := loadRoom(t, dir, nil)
			for _, f := range clean.files {
				pkg = f.Name.Name
				break
			}
			impure := loadRoom(t, dir, map[string]string{"impure.go": "package " + pkg + `

import (
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

var impureMu sync.Mutex

func impureCall() {
	_ = time.Now()
	_ = time.Since(time.Time{})
	_ = rand.IntN(3)
	_, _ = net.Dial("udp", "127.0.0.1:1")
	_ = os.Getpid()
	go func() {}()
	c := make(chan int, 1)
	c <- 1
	select {
	case <-c:
	}
	_ = rand.New(rand.NewPCG(1, 2)) // allowed: building an injected source
	impureMu.Lock()
}
`})
			var found []string
			for _, v := range impure.impurities() {
				if strings.HasPrefix(v, "impure.go:") {
					found = append(found, v)
				}
			}
			// The imports of net, os and sync; sync.Mutex; time.Now,
			// time.Since, rand.IntN, net.Dial, os.Getpid; go, chan,
			// send, select; sync's Lock.
			require.Len(t, found, 14, "%q", found)
		})
	}
}
