// Package archtest checks the direction of imports between perflab's packages
// (docs/design.md, "Data flow").
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/perflab/perflab/"

// allowed lists, for each top-level package, the perflab packages it may import. Sub-packages
// share their parent's row and may import their parent. Third-party rows: who may import them.
var allowed = map[string][]string{
	"trace":      {},
	"units":      {},
	"models":     {},
	"probes":     {"trace"},
	"collectors": {"trace"},
	"venusd":     {"trace", "units"},
	"protocol":   {"trace"},
	"loops":      {"trace"},
	"analyzers":  {"trace", "models", "protocol", "loops"},
	"compare":    {"trace", "models", "protocol", "analyzers"},
	"reports":    {"trace", "models", "protocol", "analyzers", "loops", "compare"},
	"export":     {"trace", "protocol", "analyzers"},
	"fixtures":   {"trace"},
	"merge":      {"trace"},
	"lab":        {"trace", "models", "protocol", "loops", "analyzers", "reports", "venusd"},
	"e2e":        {"trace", "models", "protocol", "loops", "analyzers", "compare", "reports", "export", "venusd", "fixtures"},
}

// owners names the only perflab packages that may import a heavy dependency.
var owners = map[string][]string{
	"github.com/cilium/ebpf":            {"probes"},
	"gonum.org/v1/gonum":                {"analyzers", "models", "loops"},
	"github.com/olekukonko/tablewriter": {"reports"},
	"github.com/google/pprof":           {"export"},
	"github.com/parquet-go/parquet-go":  {"export"},
}

func root(t *testing.T) string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s", dir)
	}
	return dir
}

func TestImportDirection(t *testing.T) {
	top := root(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(top, path)
		pkg := strings.Split(filepath.ToSlash(rel), "/")[0]
		isTest := strings.HasSuffix(path, "_test.go")
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			checked++
			for dep, who := range owners {
				if strings.HasPrefix(p, dep) && !contains(who, pkg) && pkg != "internal" && pkg != "cmd" {
					t.Errorf("%s imports %s: only %v may", rel, p, who)
				}
			}
			if !strings.HasPrefix(p, module) {
				continue
			}
			target := strings.Split(strings.TrimPrefix(p, module), "/")[0]
			if target == pkg {
				continue
			}
			if target == "internal" && strings.HasPrefix(strings.TrimPrefix(p, module), "internal/testutil") && isTest {
				continue
			}
			if pkg == "internal" || pkg == "cmd" {
				if target == "cmd" {
					t.Errorf("%s imports %s: nothing imports cmd/", rel, p)
				}
				continue
			}
			if target == "fixtures" && isTest {
				continue
			}
			rule, known := allowed[pkg]
			if !known {
				t.Errorf("%s: package %s has no row in the import table (internal/archtest)", rel, pkg)
				continue
			}
			if !contains(rule, target) {
				t.Errorf("%s imports %s: %s may import only %v", rel, p, pkg, rule)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no imports checked")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
