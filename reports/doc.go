// Package reports renders analyzer results as tables, markdown, JSON and HTML. It never computes
// and never reads traces; the exports of traces to other tools' formats live in package export.
package reports
