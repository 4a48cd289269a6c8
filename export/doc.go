// Package export writes traces in other tools' formats: JSON lines and CSV of the raw records,
// Chrome trace JSON and Perfetto's protobuf timelines, pprof profiles and Parquet tables
// (docs/export.md, docs/reports.md, docs/trace-format.md).
package export
