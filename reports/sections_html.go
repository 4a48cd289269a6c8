package reports

import (
	"fmt"
	"html/template"
	"io"
)

// SectionsHTML writes secs as one self-contained HTML page (inline CSS, no script, nothing
// loaded): title as its heading, the warnings at the top, then each section's table and notes,
// numbers right-aligned as in the text tables.
func SectionsHTML(w io.Writer, title string, secs []Section, warnings []string) error {
	type htmlSection struct {
		Section
		Right []bool
	}
	d := struct {
		Title    string
		Warnings []string
		Sections []htmlSection
	}{Title: title, Warnings: warnings}
	for i := range secs {
		d.Sections = append(d.Sections, htmlSection{secs[i], secs[i].rightAligned()})
	}
	if err := sectionsTmpl.Execute(w, d); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

var sectionsTmpl = template.Must(template.New("sections").Funcs(template.FuncMap{
	"right": func(r []bool, i int) bool { return i < len(r) && r[i] },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1340px;padding:0 1em;color:#222;line-height:1.35}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.2em .55em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.r,th.r{text-align:right}
.warnings{border:3px solid #d55e00;background:#fff3e8;padding:.6em 1em;margin:1em 0}
.warnings h2{margin:0;border:0;color:#a03c00}
.warnings li{font-weight:600}
.muted{color:#555}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Warnings}}<section class="warnings" id="warnings" role="alert">
<h2>Warnings ({{len .Warnings}})</h2>
<ul>
{{range .Warnings}}<li>{{.}}</li>
{{end}}</ul>
</section>
{{else}}<p class="muted" id="warnings">No warnings.</p>
{{end}}{{range .Sections}}{{$r := .Right}}{{if .Title}}<h2>{{.Title}}</h2>
{{end}}{{if .Header}}<table>
<tr>{{range $i, $h := .Header}}<th{{if right $r $i}} class="r"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if right $r $i}} class="r"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{range .Notes}}<p class="muted">{{.}}</p>
{{end}}{{end}}</body>
</html>
`))
