// Package reports renders analyzer results as tables, markdown, JSON, HTML, pprof and Perfetto timelines. It never computes.
package reports
