package cli

import "github.com/perflab/perflab/reports"

// Perfetto's native protobuf trace (docs/export.md).
func init() {
	registerExport("perfetto-proto", analyzedExport(reports.PerfettoProtoTrace))
}
