package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/export"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// A dirExportFunc writes the traces at paths as files in dir and returns each trace's
// Recovery.
type dirExportFunc func(dir string, paths []string, opt dirExportOptions) ([]trace.Recovery, error)

// dirExportFormats are the export formats that write a directory of files from one or more
// traces (-o DIR TRACE...).
var dirExportFormats = map[string]dirExportFunc{}

// dirExportOptions are the flags of the directory formats.
type dirExportOptions struct {
	protocol, specFile, unit, unitCmds string
	labels                             map[string]string
	spec                               *protocol.Spec // loaded from specFile
}

func init() {
	dirExportFormats["parquet"] = func(dir string, paths []string, o dirExportOptions) ([]trace.Recovery, error) {
		return export.Parquet(dir, traceInputs(paths), export.ParquetOptions{Labels: o.labels, Analyzers: analyzers.Options{
			Protocol: o.protocol, Spec: o.spec, Unit: o.unit, UnitCommands: o.unitCmds}})
	}
}

// dirExportFlags adds the flags of the directory formats to fs.
func dirExportFlags(fs *flag.FlagSet) *dirExportOptions {
	o := &dirExportOptions{labels: map[string]string{}}
	fs.StringVar(&o.protocol, "protocol", "auto", "parquet: protocol decoder (auto, "+joinBuiltins()+")")
	fs.StringVar(&o.specFile, "protocol-spec", "", "parquet: decode with the protocol spec in `FILE` (docs/protocol-spec.md)")
	fs.StringVar(&o.unit, "unit", "", "parquet: the marker `NAME` of a unit of work (default token)")
	fs.StringVar(&o.unitCmds, "unit-command", "", "parquet: the commands (`NAME,...`) that each open a unit of work")
	fs.Var(labelFlag(o.labels), "label", "parquet: add a `K=V` label to every trace's labels (repeatable)")
	return o
}

func joinBuiltins() string {
	s := ""
	for i, n := range protocol.Builtins() {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// onlyForDir refuses the directory formats' flags with another format.
func (o *dirExportOptions) onlyForDir() error {
	if o.protocol != "auto" || o.specFile != "" || o.unit != "" || o.unitCmds != "" || len(o.labels) > 0 {
		return BadInput("--protocol, --protocol-spec, --unit, --unit-command and --label apply to --format parquet only")
	}
	return nil
}

// runDirExport runs a directory format: -o DIR is required, and takes one or more traces.
func runDirExport(env *Env, c *Command, fn dirExportFunc, dir string, paths []string, o *dirExportOptions) error {
	if dir == "" {
		return BadInput("-o DIR is required: the tables are written as files in DIR")
	}
	if len(paths) == 0 {
		return BadInput("want at least one trace (usage: perflab export %s)", c.Usage)
	}
	if o.specFile != "" {
		s, err := protocol.LoadSpec(o.specFile)
		if err != nil {
			return BadInput("--protocol-spec: %v", err)
		}
		o.spec = s
	} else if o.protocol != "auto" {
		if _, err := protocol.BuiltinSpec(o.protocol); err != nil {
			return BadInput("--protocol: %v", err)
		}
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return BadInput("-o %s: not a directory", dir)
	}
	recs, err := fn(dir, paths, *o)
	if err != nil {
		var re *protocol.ReadError
		if errors.As(err, &re) {
			return exportReadError(re.Path, re.Err)
		}
		return fmt.Errorf("export: %w", err)
	}
	for i, rec := range recs {
		if rec.Damaged() && i < len(paths) {
			fmt.Fprintf(env.Stderr, "perflab export: warning: %s is damaged or cut, exported what could be read: %v\n", paths[i], rec)
		}
	}
	return nil
}
