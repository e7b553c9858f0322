package style

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// rootContextAllowed are where a root context may be made freely: the
// command's main, the daemons that own a process's life, and what only
// tests build.
var rootContextAllowed = append([]string{"cmd/kndl/", "internal/daemon/"}, testOnly...)

// rootContextExceptions are the other places that make a root context, by
// file and function, each with why its work must not end with a caller's
// context or a component's life.
var rootContextExceptions = map[string]string{
	// The one root every component's lifetime (the Hub's, its Environment
	// service's, its pull request tracker's) is made from; Close ends it.
	"internal/lifetime/lifetime.go New": "the lifetimes' root",
	// The Owner's lifetime, with its timers (after) counted under the same
	// lock; Close cancels it and waits.
	"internal/hub/session/owner.go New": "the Session Owner's lifetime",
	// A revoke whose token was already taken out of the store must finish
	// though the Hub is closing (Close waits for it, revokeTimeout at
	// most): cut short, the token would stay live until it expires.
	"internal/hub/masks/tokens.go (*Tokens).goEnd": "a revoke outlives Close",
	// Prometheus's Collect takes no context; scrapeTimeout bounds the read.
	"internal/metrics/metrics.go gauges.Collect": "no context to take",
	// The runtime's exec must not be killed with Exec's context: that
	// would end crun or runsc and leave the process in the Sandbox
	// running. Exec's context ends the process itself (process.kill).
	"internal/sandbox/oci/exec.go (*OCI).Exec": "the runtime outlives its caller's context",
	// The kill that ends an Exec's process runs once that Exec's context
	// is done, so it can't take it; waitDelay bounds it.
	"internal/sandbox/oci/gvisor.go ociRuntime.runscKill": "runs after its caller's context ended",
	// A confined task is a process of its own, the whole of its life:
	// the Runner's deadline kills it from outside; this one bounds git.
	"internal/runner/changes.go runChangesTask": "a confined task's process is its root",
	// A Sandbox's PID 1 is a process of its own; its hook door lives
	// until the Sandbox stops.
	"internal/sandbox/oci/helper.go runInit": "a Sandbox's init is its root",
}

// TestNoRootContextOutsideMainDaemonsAndTests: work outside main, the
// daemons and tests runs under a request's context or its component's
// lifetime (internal/lifetime), which Close ends, so nothing outlives
// Close; a context.Background or context.TODO elsewhere is refused unless
// it is a named exception.
func TestNoRootContextOutsideMainDaemonsAndTests(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]bool{}
	for _, rel := range goFiles(t, root) {
		if under(rel, rootContextAllowed) {
			continue
		}
		for _, at := range rootContextCalls(t, filepath.Join(root, rel)) {
			key := rel + " " + at
			found[key] = true
			if _, ok := rootContextExceptions[key]; !ok {
				t.Errorf("%s makes a root context: use the request's, or its component's lifetime (internal/lifetime) that Close ends, or name it in rootContextExceptions with why", key)
			}
		}
	}
	if len(found) == 0 {
		t.Fatalf("found no root context under %s: is the walk reading the code?", root)
	}
	for key := range rootContextExceptions {
		if !found[key] {
			t.Errorf("the exception %q names no root context any more: remove it", key)
		}
	}
}

// rootContextCalls names the functions in the file at path that call
// context.Background or context.TODO ("" for a package-level one).
func rootContextCalls(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "context" {
			name = "context"
			if im.Name != nil {
				name = im.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var out []string
	for _, decl := range f.Decls {
		at := ""
		if fd, ok := decl.(*ast.FuncDecl); ok {
			at = funcName(fd)
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && (sel.Sel.Name == "Background" || sel.Sel.Name == "TODO") {
				out = append(out, at)
			}
			return true
		})
	}
	return out
}

// funcName is a function's name as the exceptions write it: New,
// (*Hub).Close, gauges.Collect.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if ix, ok := typ.(*ast.IndexExpr); ok { // a generic receiver
		typ = ix.X
	}
	switch r := typ.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fd.Name.Name
		}
	case *ast.Ident:
		return r.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
