package client_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
)

// The HTTP client implements the protocol of the in-process one.
var _ stepwise.Client = (*client.Client)(nil)

// TestImportsOnlyWire keeps the client free of engine code: of the module,
// its non-test files import only the wire types (wire) and the shared
// step types (steptype).
func TestImportsOnlyWire(t *testing.T) {
	const module = "github.com/stepwise-run/stepwise"
	allowed := map[string]bool{module + "/wire": true, module + "/steptype": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if (path == module || strings.HasPrefix(path, module+"/")) && !allowed[path] {
				t.Errorf("%s imports %s: package client may import only %s/wire and %s/steptype of the module", name, path, module, module)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
