package cli

import "github.com/perflab/perflab/export"

// Perfetto's native protobuf trace (docs/export.md).
func init() {
	registerExport("perfetto-proto", analyzedExport(export.PerfettoProtoTrace))
}
