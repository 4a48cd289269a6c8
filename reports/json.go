package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
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
	conns := c.Connections
	if len(conns) == 0 {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&c)
	}
	// A trace of many connections makes a document of about 650 bytes per connection: encoded
	// whole, it would be held two or three times over (encoded, indented, grown). The rest is
	// encoded with an empty list, and the connections are written one by one in its place,
	// indented as the whole would be.
	c.Connections = []analyzers.ConnStats{}
	doc, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	const slot = "\n  \"connections\": []"
	at := bytes.Index(doc, []byte(slot))
	if at < 0 {
		return fmt.Errorf("encode summary: no connections list")
	}
	at += len(slot) - 1 // at the closing bracket
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(doc[:at])
	var row bytes.Buffer // one connection, reused: the encoder keeps its own buffers too
	enc := json.NewEncoder(&row)
	enc.SetIndent("    ", "  ")
	for i := range conns {
		row.Reset()
		if err := enc.Encode(&conns[i]); err != nil {
			return fmt.Errorf("encode connection %d: %w", conns[i].ID, err)
		}
		bw.WriteString("\n    ")
		bw.Write(bytes.TrimSuffix(row.Bytes(), []byte("\n")))
		if i < len(conns)-1 {
			bw.WriteByte(',')
		}
	}
	bw.WriteString("\n  ")
	bw.Write(doc[at:])
	bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
