package reports

import (
	"encoding/json"
	"io"

	"github.com/perflab/perflab/analyzers"
)

// JSON writes the Summary as one indented JSON object with "schema": "perflab.analyze/v1"
// (docs/analyze.md lists the fields; compare and gate read them back). Nil lists are written
// as [] so scripts can index them without checks.
func JSON(w io.Writer, s *analyzers.Summary) error {
	c := *s
	c.Schema = analyzers.SummarySchema
	if c.Traces == nil {
		c.Traces = []string{}
	}
	if c.Connections == nil {
		c.Connections = []analyzers.ConnStats{}
	}
	if c.Commands == nil {
		c.Commands = []analyzers.CmdStats{}
	}
	if c.Units == nil {
		c.Units = []analyzers.UnitStats{}
	}
	if c.LittlesLaw == nil {
		c.LittlesLaw = []analyzers.LittleRow{}
	}
	if c.Modes == nil {
		c.Modes = []analyzers.Mode{}
	}
	if c.Warnings == nil {
		c.Warnings = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&c)
}
