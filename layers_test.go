package swim

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The layers of this package are derived from the code, not listed by
// hand (doc.go, "Layers"). The core's seeds are the Machine, the
// machineState it embeds and the Registry, their methods and their
// constructors; the runtime's are the Memberlist, its methods and New.
// Beyond its seeds, an unexported declaration belongs to a side when every
// declaration that uses it does (a method goes with its type); exported
// names are API, and with everything else (Config, Member, helpers both
// use) shared. A file that declares something of the core is a core file,
// one that declares something of the runtime a runtime file; the tests
// below hold the rules between them, and `go test -run
// TestNoFileMixesLayers -v` lists each layer's files.

// layer is what a declaration or a file belongs to.
type layer uint8

const (
	shared layer = iota
	core
	runtimeLayer
)

func (l layer) String() string {
	return [...]string{"shared", "core", "runtime"}[l]
}

// decl is one package-level declaration: a func, a method, a type, a var
// or a const.
type decl struct {
	obj  types.Object
	file string // base name
	// nodes are its declaration and, for a var an init func fills, that
	// func: what the var holds is what init puts in it.
	nodes []ast.Node
	refs  map[types.Object]bool // package-level declarations it uses
}

// layering is the package's declarations, what each uses, and the layer
// each declaration and file belongs to.
type layering struct {
	fset  *token.FileSet
	pkg   *types.Package
	info  *types.Info
	files map[string]*ast.File
	decls map[types.Object]*decl
	// owner maps a struct field or an interface method to the named type
	// that declares it.
	owner map[types.Object]types.Object
	layer map[types.Object]layer
	// fileLayer holds each file's layer; a file with declarations of both
	// the core and the runtime is in mixed instead.
	fileLayer map[string]layer
	mixed     map[string]bool
}

var (
	// layerImporter type-checks imported packages from source once and
	// keeps them for every later check in this process.
	layerImporterOnce sync.Once
	layerImporter     types.Importer
)

// loadLayering parses the package's non-test files in dir, adds extra
// (base name -> source, for the self-tests) and derives the layers.
func loadLayering(t *testing.T, dir string, extra map[string]string) *layering {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	l := &layering{fset: fset, files: map[string]*ast.File{}}
	var files []*ast.File
	add := func(name string, src any) {
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		require.NoError(t, err)
		l.files[filepath.Base(name)] = f
		files = append(files, f)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, "_test.go") {
			add(name, nil)
		}
	}
	for name, src := range extra {
		add(name, src)
	}
	layerImporterOnce.Do(func() { layerImporter = importer.ForCompiler(fset, "source", nil) })
	l.info = &types.Info{
		Uses: map[*ast.Ident]types.Object{},
		Defs: map[*ast.Ident]types.Object{},
	}
	conf := types.Config{Importer: layerImporter}
	l.pkg, err = conf.Check("github.com/swim-go/swim", fset, files, l.info)
	require.NoError(t, err)
	l.collect()
	l.derive()
	return l
}

// collect finds every package-level declaration and what it uses.
func (l *layering) collect() {
	l.decls = map[types.Object]*decl{}
	l.owner = map[types.Object]types.Object{}
	var inits []*ast.FuncDecl
	for name, f := range l.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.Name == "init" && d.Recv == nil {
					inits = append(inits, d)
					continue
				}
				l.decls[l.info.Defs[d.Name]] = &decl{obj: l.info.Defs[d.Name], file: name, nodes: []ast.Node{d}}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						obj := l.info.Defs[s.Name]
						l.decls[obj] = &decl{obj: obj, file: name, nodes: []ast.Node{s}}
						l.ownMembers(obj)
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if obj := l.info.Defs[id]; obj != nil {
								l.decls[obj] = &decl{obj: obj, file: name, nodes: []ast.Node{s}}
							}
						}
					}
				}
			}
		}
	}
	for _, fn := range inits {
		// An init func is no declaration of its own: it belongs to the
		// package-level vars it assigns.
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				for _, lhs := range as.Lhs {
					if d := l.decls[l.info.Uses[rootIdent(lhs)]]; d != nil {
						d.nodes = append(d.nodes, fn)
					}
				}
			}
			return true
		})
	}
	for _, d := range l.decls {
		d.refs = map[types.Object]bool{}
		for _, node := range d.nodes {
			ast.Inspect(node, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				if target := l.declOf(l.info.Uses[id]); target != nil && target != d.obj {
					d.refs[target] = true
				}
				return true
			})
		}
	}
}

// rootIdent is the variable an assignment's left side writes to: x in x,
// x[i], x.f or x[i].f; nil for anything else.
func rootIdent(e ast.Expr) *ast.Ident {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.IndexExpr:
			e = x.X
		case *ast.SelectorExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// ownMembers records the named type obj as the owner of its struct fields
// and interface methods.
func (l *layering) ownMembers(obj types.Object) {
	switch u := obj.Type().Underlying().(type) {
	case *types.Struct:
		for f := range u.Fields() {
			l.owner[f] = obj
		}
	case *types.Interface:
		for i := range u.NumExplicitMethods() {
			l.owner[u.ExplicitMethod(i)] = obj
		}
	}
}

// declOf maps a used object to the package-level declaration it stands
// for: itself, or the type that owns a field or an interface method; nil
// for locals and other packages' objects.
func (l *layering) declOf(obj types.Object) types.Object {
	if obj == nil || obj.Pkg() != l.pkg {
		return nil
	}
	if _, ok := l.decls[obj]; ok {
		return obj
	}
	if o, ok := l.owner[obj]; ok {
		return o
	}
	return nil
}

// receiverName is the base type name of a method's receiver, "" for a
// plain function or a declaration that is not a func.
func receiverName(obj types.Object) string {
	fn, ok := obj.(*types.Func)
	if !ok {
		return ""
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}

// coreTypes are the core by definition: the Machine, the state it embeds
// and the Registry that stores members for one Machine or many.
var coreTypes = map[string]bool{"Machine": true, "machineState": true, "Registry": true}

// runtimeTypes are the runtime by definition: the Memberlist.
var runtimeTypes = map[string]bool{"Memberlist": true}

// isCoreSeed: a core type, a method of one, or a constructor of one.
func (l *layering) isCoreSeed(obj types.Object) bool { return l.isSeed(obj, coreTypes) }

// isRuntimeSeed: the Memberlist, its methods and New.
func (l *layering) isRuntimeSeed(obj types.Object) bool { return l.isSeed(obj, runtimeTypes) }

// isSeed reports whether obj is one of the types, a method of one, or a
// constructor of one (a func whose results include one).
func (l *layering) isSeed(obj types.Object, seedTypes map[string]bool) bool {
	switch obj := obj.(type) {
	case *types.TypeName:
		return seedTypes[obj.Name()]
	case *types.Func:
		if seedTypes[receiverName(obj)] {
			return true
		}
		if obj.Signature().Recv() != nil {
			return false
		}
		for v := range obj.Signature().Results().Variables() {
			t := v.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok && n.Obj().Pkg() == l.pkg && seedTypes[n.Obj().Name()] {
				return true
			}
		}
	}
	return false
}

// receiver is the type declaration of a method's receiver, nil for
// anything else.
func (l *layering) receiver(obj types.Object) types.Object {
	name := receiverName(obj)
	if name == "" {
		return nil
	}
	return l.pkg.Scope().Lookup(name)
}

// derive computes each declaration's layer: for each side, the largest
// set of declarations reachable from its seeds whose users all lie in the
// set (so that mutually recursive helpers of one side stay on it) and
// whose methods' types lie in it too, then each file's layer.
func (l *layering) derive() {
	users := map[types.Object][]types.Object{}
	for obj, d := range l.decls {
		for r := range d.refs {
			users[r] = append(users[r], obj)
		}
	}
	side := func(seed, other func(types.Object) bool) map[types.Object]bool {
		in := map[types.Object]bool{}
		var stack []types.Object
		for obj := range l.decls {
			if seed(obj) {
				in[obj] = true
				stack = append(stack, obj)
			}
		}
		for len(stack) > 0 {
			obj := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for r := range l.decls[obj].refs {
				if !in[r] && !other(r) {
					in[r] = true
					stack = append(stack, r)
				}
			}
		}
		for changed := true; changed; {
			changed = false
			for obj := range in {
				if seed(obj) {
					continue
				}
				if obj.Exported() && l.receiver(obj) == nil {
					// Exported names are API, shared by whoever uses
					// them; they are the core's or the runtime's only
					// as seeds.
					delete(in, obj)
					changed = true
					continue
				}
				if recv := l.receiver(obj); recv != nil && !in[recv] {
					// A method goes with its type: Config's accessors are
					// as shared as Config.
					delete(in, obj)
					changed = true
					continue
				}
				for _, u := range users[obj] {
					if !in[u] {
						delete(in, obj)
						changed = true
						break
					}
				}
			}
		}
		return in
	}
	coreSet, runtimeSet := side(l.isCoreSeed, l.isRuntimeSeed), side(l.isRuntimeSeed, l.isCoreSeed)
	l.layer = map[types.Object]layer{}
	l.fileLayer = map[string]layer{}
	l.mixed = map[string]bool{}
	for obj, d := range l.decls {
		switch {
		case coreSet[obj]:
			l.layer[obj] = core
		case runtimeSet[obj]:
			l.layer[obj] = runtimeLayer
		default:
			continue
		}
		switch was := l.fileLayer[d.file]; {
		case was == shared:
			l.fileLayer[d.file] = l.layer[obj]
		case was != l.layer[obj]:
			l.mixed[d.file] = true
		}
	}
}

// filesOf lists the files of one layer, sorted.
func (l *layering) filesOf(want layer) []string {
	var out []string
	for name := range l.files {
		if l.fileLayer[name] == want && !l.mixed[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// where names a declaration for a message.
func (l *layering) where(obj types.Object) string {
	name := obj.Name()
	if r := receiverName(obj); r != "" {
		name = r + "." + name
	}
	return fmt.Sprintf("%s (%s)", name, l.decls[obj].file)
}

// mixing lists the files that declare both core and runtime code, with
// one declaration of each.
func (l *layering) mixing() []string {
	var out []string
	for name := range l.mixed {
		var c, r []string
		for obj, d := range l.decls {
			if d.file != name {
				continue
			}
			switch l.layer[obj] {
			case core:
				c = append(c, l.where(obj))
			case runtimeLayer:
				r = append(r, l.where(obj))
			}
		}
		sort.Strings(c)
		sort.Strings(r)
		out = append(out, fmt.Sprintf("%s mixes the core (%s) with the runtime (%s)", name, c[0], r[0]))
	}
	sort.Strings(out)
	return out
}

// crossings lists every use, in a file that is not a core file, of an
// unexported name a core file declares: a package-level name, a field or
// a method. The runtime reaches the core through its exported API only.
func (l *layering) crossings() []string {
	var out []string
	for name, f := range l.files {
		if l.fileLayer[name] == core || l.mixed[name] {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := l.info.Uses[id]
			if obj == nil || obj.Exported() || obj.Pkg() != l.pkg {
				return true
			}
			home := obj
			if v, ok := obj.(*types.Var); ok && v.IsField() {
				home = l.owner[obj]
			}
			d, ok := l.decls[home]
			if !ok || l.fileLayer[d.file] != core || l.mixed[d.file] {
				return true
			}
			out = append(out, fmt.Sprintf("%s: %s file uses %s, unexported in core file %s",
				l.fset.Position(id.Pos()), l.fileLayer[name], id.Name, d.file))
			return true
		})
	}
	sort.Strings(out)
	return out
}

// coreUsesRuntime lists the core declarations that use a declaration of a
// runtime file: the core returns its own errors and needs nothing the
// runtime defines.
func (l *layering) coreUsesRuntime() []string {
	var out []string
	for obj, d := range l.decls {
		if l.layer[obj] != core {
			continue
		}
		for r := range d.refs {
			if rd := l.decls[r]; l.fileLayer[rd.file] == runtimeLayer && !l.mixed[rd.file] {
				out = append(out, fmt.Sprintf("core %s uses %s of runtime file %s", l.where(obj), r.Name(), rd.file))
			}
		}
	}
	sort.Strings(out)
	return out
}

// forbiddenImports would give the core I/O, shared state or randomness of
// its own.
var forbiddenImports = map[string]string{
	"net":         "I/O (net/netip, plain values, is fine)",
	"net/http":    "I/O",
	"os":          "I/O",
	"sync":        "locks belong to the runtime",
	"sync/atomic": "shared state belongs to the runtime",
	"math/rand":   "the global random source (use the injected *rand.Rand)",
	"crypto/rand": "a random source other than the injected one",
	"runtime":     "the scheduler",
	"go.uber.org/zap": "logging is the runtime's; the core reports in " +
		"counters and events",
}

// forbiddenTimeFuncs read the clock or arm a timer.
var forbiddenTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// coreReach is every declaration the core's code can run or read: the
// closure of the core's seeds over what they use, shared declarations
// included. A type's fields and methods are not followed: the methods the
// core calls are reached as calls, and a core type's fields are checked
// with its file.
func (l *layering) coreReach() map[types.Object]bool {
	reach := map[types.Object]bool{}
	var stack []types.Object
	for obj := range l.decls {
		if l.isCoreSeed(obj) {
			reach[obj] = true
			stack = append(stack, obj)
		}
	}
	for len(stack) > 0 {
		obj := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, isType := obj.(*types.TypeName); isType {
			continue
		}
		for r := range l.decls[obj].refs {
			if !reach[r] {
				reach[r] = true
				stack = append(stack, r)
			}
		}
	}
	return reach
}

// impurities lists what the core must not do (the package doc's "Layers":
// a core with no I/O, no clock and no randomness but the *rand.Rand it is
// given is what lets the simulator replay it exactly): a core file may not
// import a package that does I/O or locking, and no declaration the core's
// seeds reach, shared ones included, may read the clock, start a
// goroutine, use a channel or draw from a global random source.
func (l *layering) impurities() []string {
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, l.fset.Position(n.Pos()).String()+": "+what)
	}
	for name, f := range l.files {
		if l.fileLayer[name] != core {
			continue
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbiddenImports[path]; bad {
				report(imp, "core file imports "+path+": "+why)
			}
		}
	}
	for obj := range l.coreReach() {
		if _, isType := obj.(*types.TypeName); isType && l.fileLayer[l.decls[obj].file] != core {
			continue
		}
		for _, node := range l.decls[obj].nodes {
			inspectPurity(l.info, node, report)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// inspectPurity reports, in the code under node, what neither the core
// nor a package it drives may do: start a goroutine, use a channel, use a
// forbidden package, read the clock or arm a timer, or draw from a global
// random source (math/rand/v2's New and NewPCG build the injected one).
func inspectPurity(info *types.Info, node ast.Node, report func(ast.Node, string)) {
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "starts a goroutine")
		case *ast.SelectStmt:
			report(n, "selects on channels")
		case *ast.SendStmt:
			report(n, "sends on a channel")
		case *ast.ChanType:
			report(n, "uses a channel")
		case *ast.SelectorExpr:
			used := info.Uses[n.Sel]
			if used == nil || used.Pkg() == nil {
				break
			}
			path := used.Pkg().Path()
			if why, bad := forbiddenImports[path]; bad {
				report(n, "uses "+path+"."+used.Name()+": "+why)
			}
			if _, isFunc := used.(*types.Func); !isFunc || receiverName(used) != "" {
				break
			}
			switch path {
			case "time":
				if forbiddenTimeFuncs[used.Name()] {
					report(n, "calls time."+used.Name())
				}
			case "math/rand/v2":
				if used.Name() != "New" && used.Name() != "NewPCG" {
					report(n, "draws from the global random source (rand."+used.Name()+")")
				}
			}
		}
		return true
	})
}

var (
	layersOnce sync.Once
	layers     *layering
)

// thisPackage is the layering of the package as it is, derived once.
func thisPackage(t *testing.T) *layering {
	layersOnce.Do(func() { layers = loadLayering(t, ".", nil) })
	require.NotNil(t, layers)
	return layers
}

// TestNoFileMixesLayers: every file holds core code, runtime code or
// shared code, never core and runtime together.
func TestNoFileMixesLayers(t *testing.T) {
	l := thisPackage(t)
	require.Empty(t, l.mixing())
	t.Logf("core: %s", strings.Join(l.filesOf(core), " "))
	t.Logf("runtime: %s", strings.Join(l.filesOf(runtimeLayer), " "))
	t.Logf("shared: %s", strings.Join(l.filesOf(shared), " "))
}

// TestRuntimeUsesCoreAPIOnly: no runtime or shared file uses an
// unexported name of a core file, and the core uses nothing a runtime
// file declares.
func TestRuntimeUsesCoreAPIOnly(t *testing.T) {
	l := thisPackage(t)
	require.Empty(t, l.crossings())
	require.Empty(t, l.coreUsesRuntime())
}

// TestCoreIsPure: the core does no I/O, takes no lock, reads no clock,
// starts no goroutine, uses no channel and draws randomness only from the
// *rand.Rand it is given (the package doc, "Layers").
func TestCoreIsPure(t *testing.T) {
	require.Empty(t, thisPackage(t).impurities())
}

// TestLayerChecksCatch: each check above finds what it is for in the
// package plus one added file, so that their passing means something. The
// added files are a new file of Machine methods (found to be core with no
// list edited), a runtime method reaching into the Machine's state, a
// file mixing both, and a core method returning a runtime error.
func TestLayerChecksCatch(t *testing.T) {
	impure := loadLayering(t, ".", map[string]string{"newcore.go": `package swim

import (
	"math/rand/v2"
	"sync"
	"time"
)

var impureMu sync.Mutex

func (m *Machine) impure() {
	_ = time.Now()
	_ = rand.IntN(3)
	go func() {}()
	c := make(chan int, 1)
	c <- 1
	select {
	case <-c:
	}
	_ = rand.New(rand.NewPCG(1, 2)) // allowed: building the injected source
	impureHelper()
}

// impureHelper is only the core's, so it is core too.
func impureHelper() { impureMu.Lock() }

// impureTable is filled in init, as the table of timer kinds is.
var impureTable [1]func()

func init() { impureTable[0] = func() { _ = time.Since(time.Time{}) } }

func (m *Machine) useTable() { impureTable[0]() }
`})
	require.Equal(t, core, impure.fileLayer["newcore.go"])
	var inNew []string
	for _, v := range impure.impurities() {
		if strings.HasPrefix(v, "newcore.go:") {
			inNew = append(inNew, v)
		}
	}
	// import sync, time.Now, rand.IntN, go, chan, send, select,
	// sync.Mutex (the var's type), Lock (through the helper), time.Since
	// (through the table init fills).
	require.Len(t, inNew, 10, "%q", inNew)

	reach := loadLayering(t, ".", map[string]string{"peek.go": `package swim

func (ml *Memberlist) peek() int { return ml.machine.numOthers() + len(ml.machine.merges) }
`})
	require.Len(t, reach.crossings(), 2, "%q", reach.crossings())

	// A Machine method reading a runtime field of Config puts it out of
	// place.
	cfgRead := loadLayering(t, ".", map[string]string{"readlogger.go": `package swim

func (m *Machine) hasLogger() bool { return m.cfg.Logger != nil }
`})
	require.Equal(t, []string{"Logger is among the runtime's fields, but the core reads it"}, cfgRead.configSections())

	mixed := loadLayering(t, ".", map[string]string{"both.go": `package swim

func (m *Machine) both() int      { return 1 }
func (ml *Memberlist) both() int { return 2 }
`})
	require.Len(t, mixed.mixing(), 1, "%q", mixed.mixing())

	errs := loadLayering(t, ".", map[string]string{"runerr.go": `package swim

import "errors"

var errRuntimeOnly = errors.New("runtime")

func (ml *Memberlist) runtimeErr() error { return errRuntimeOnly }
`, "coreerr.go": `package swim

func (m *Machine) coreErr() error { return errRuntimeOnly }
`})
	require.Equal(t, runtimeLayer, errs.fileLayer["runerr.go"])
	require.Len(t, errs.coreUsesRuntime(), 1, "%q", errs.coreUsesRuntime())
}

// TestDocLayerMap: the layer map in the package documentation (doc.go,
// "Layers") names each file of the package in the layer the code puts it
// in, and names every internal package, and only packages that exist.
func TestDocLayerMap(t *testing.T) {
	l := thisPackage(t)
	doc := l.files["doc.go"].Doc.Text()
	start := strings.Index(doc, "# Layers\n")
	require.GreaterOrEqual(t, start, 0, "doc.go has no Layers section")
	section := doc[start+len("# Layers\n"):]
	if end := strings.Index(section, "\n# "); end >= 0 {
		section = section[:end]
	}
	goFile := regexp.MustCompile(`\b[a-z_]+\.go\b`)
	named := map[string][]string{}
	for _, item := range strings.Split(section, "\n  - ")[1:] {
		label, body, ok := strings.Cut(item, ":")
		require.True(t, ok, "a bullet without a label: %q", item)
		files := slices.Sorted(slices.Values(goFile.FindAllString(body, -1)))
		named[label] = slices.Compact(files)
	}
	want := map[string][]string{
		"Core":    l.filesOf(core),
		"Runtime": l.filesOf(runtimeLayer),
		"Shared":  slices.DeleteFunc(l.filesOf(shared), func(f string) bool { return f == "doc.go" }),
	}
	require.Equal(t, want, named, "doc.go's layer map and the code disagree")

	mentioned := slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`\binternal/[a-z]+`).FindAllString(section, -1))))
	dirs, err := filepath.Glob("internal/*")
	require.NoError(t, err)
	var exist []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			exist = append(exist, filepath.ToSlash(d))
		}
	}
	sort.Strings(exist)
	require.Equal(t, exist, mentioned, "doc.go's layer map and the internal packages disagree")
}

// configSections checks Config's layout against the code: the fields
// before the comment that says "The fields above are what the protocol
// reads" must each be read by code the core runs, and the fields after it
// by none. It returns the fields out of place.
func (l *layering) configSections() []string {
	cfg := l.pkg.Scope().Lookup("Config")
	read := map[types.Object]bool{}
	for obj := range l.coreReach() {
		if _, isType := obj.(*types.TypeName); isType {
			continue
		}
		if receiverName(obj) == "Config" && obj.Name() == "Validate" {
			continue // it checks every field, whoever reads it
		}
		for _, node := range l.decls[obj].nodes {
			ast.Inspect(node, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					if v, ok := l.info.Uses[id].(*types.Var); ok && v.IsField() && l.owner[v] == cfg {
						read[v] = true
					}
				}
				return true
			})
		}
	}
	spec := l.decls[cfg].nodes[0].(*ast.TypeSpec)
	var marker token.Pos
	for _, cg := range l.files[l.decls[cfg].file].Comments {
		if cg.Pos() > spec.Pos() && cg.End() < spec.End() && strings.Contains(cg.Text(), "The fields above are what the protocol reads") {
			marker = cg.Pos()
		}
	}
	if marker == token.NoPos {
		return []string{"Config has no comment dividing the protocol's fields from the runtime's"}
	}
	var out []string
	for _, field := range spec.Type.(*ast.StructType).Fields.List {
		for _, name := range field.Names {
			obj := l.info.Defs[name]
			switch before := name.Pos() < marker; {
			case before && !read[obj]:
				out = append(out, name.Name+" is among the protocol's fields, but the core never reads it")
			case !before && read[obj]:
				out = append(out, name.Name+" is among the runtime's fields, but the core reads it")
			}
		}
	}
	return out
}

// TestConfigSeparatesCoreFromRuntime: Config lists what the protocol
// reads first and what only the runtime reads after, as the code uses
// them, so a user driving a Machine knows which fields matter.
func TestConfigSeparatesCoreFromRuntime(t *testing.T) {
	require.Empty(t, thisPackage(t).configSections())
}
