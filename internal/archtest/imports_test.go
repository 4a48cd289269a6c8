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
// share their parent's row and may import their parent, unless they have a row of their own in
// subAllowed ("venusd/wire"), which then is all they may import. A row may name a sub-package
// ("venusd/wire") to allow only that one. Third-party rows: who may import them.
var allowed = map[string][]string{
	"trace":      {},
	"units":      {},
	"models":     {},
	"probes":     {"trace"},
	"collectors": {"trace"},
	"venusd":     {"trace", "units", "models"},
	"protocol":   {"trace"},
	"loops":      {"trace"},
	"evidence":   {"trace"},
	"analyzers":  {"trace", "models", "protocol", "loops", "breakdown", "evidence"},
	"compare":    {"trace", "models", "protocol", "analyzers"},
	"reports":    {"trace", "models", "collectors", "protocol", "analyzers", "loops", "compare", "breakdown", "evidence"},
	"export":     {"trace", "protocol", "analyzers", "breakdown"},
	"fixtures":   {"trace", "venusd/wire"},
	"merge":      {"trace"},
	"breakdown":  {"trace", "merge", "protocol"},
	"lab":        {"trace", "models", "protocol", "loops", "analyzers", "reports", "venusd"},
	"e2e":        {"trace", "models", "protocol", "loops", "analyzers", "compare", "reports", "export", "venusd", "fixtures", "evidence"},
}

// subAllowed are the rows of sub-packages that have their own (see allowed).
var subAllowed = map[string][]string{
	// venusd/wire, the VPLS frame format, is a leaf that anything may build frames with.
	"venusd/wire": {},
	// venusd/device, the emulated GPU, runs the commands of the wire format.
	"venusd/device": {"venusd/wire"},
	// venusd/link, the emulated network link, moves frames it does not read.
	"venusd/link": {},
	// venusd/tracer, the in-process tracer, writes trace events of wire frames.
	"venusd/tracer": {"trace", "venusd/wire"},
	// venusd/transport, the tcp, unix and shm transports, dials, listens and reads whole
	// frames; it knows the frame header, not the commands.
	"venusd/transport": {"trace", "units", "venusd/wire"},
}

// testsMayImport lists what the tests of a package may import beyond its row: venusd/wire's
// test checks the wire format against the venus protocol spec that analyze decodes with.
var testsMayImport = map[string][]string{
	"venusd/wire": {"protocol"},
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
		from := pkg // the row that applies: the sub-package's own when it has one
		if sub := subPackage(filepath.ToSlash(filepath.Dir(rel))); sub != "" {
			if _, ok := subAllowed[sub]; ok {
				from = sub
			}
		}
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
			targetSub := subPackage(strings.TrimPrefix(p, module))
			if (from == pkg && target == pkg) || (from != pkg && targetSub == from) {
				continue
			}
			if target == "internal" && isTest && (strings.HasPrefix(strings.TrimPrefix(p, module), "internal/testutil") ||
				strings.HasPrefix(strings.TrimPrefix(p, module), "internal/ggmlpeer")) {
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
			rule, known := allowed[from]
			if r, ok := subAllowed[from]; ok {
				rule, known = r, true
			}
			if !known {
				t.Errorf("%s: package %s has no row in the import table (internal/archtest)", rel, from)
				continue
			}
			if isTest {
				rule = append(rule[:len(rule):len(rule)], testsMayImport[from]...)
			}
			if !contains(rule, target) && !contains(rule, targetSub) {
				t.Errorf("%s imports %s: %s may import only %v", rel, p, from, rule)
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

// subPackage returns the first two elements of a slash path ("venusd/wire" of
// "venusd/wire/x"), or "" for a top-level one.
func subPackage(path string) string {
	parts := strings.SplitN(path, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
