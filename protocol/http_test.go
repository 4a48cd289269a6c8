package protocol

import (
	"fmt"
	"strings"
	"testing"
)

// 100 Continue is interim: the request's final response answers it; 101 Switching Protocols
// is final.
func TestHTTPInterimResponses(t *testing.T) {
	spec, _ := BuiltinSpec("http")
	var st callStream
	add := st.add
	add("POST /up HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", false)
	add("HTTP/1.1 100 Continue\r\n\r\n", true)
	add("abc", false)
	add("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", true)
	add("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", false)
	add("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", true)
	msgs := feed(t, spec, st.data, st.cuts, 256)
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprintf("%s/%d/%v/%v", m.Name, m.Status, m.IsReply, m.RTT > 0))
	}
	// the request ends after its body, which the client sends once 100 Continue came
	want := "POST /up/100/true/false POST /up/0/false/false POST /up/201/true/true GET /ws/0/false/false GET /ws/101/true/true"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestPathTemplate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/users/42", "/users/{id}"},
		{"/users/42/posts?limit=10", "/users/{id}/posts"},
		{"/", "/"},
		{"/v1/items/3.14", "/v1/items/{id}"},
		{"/blob/7f3a9c21-0b4e-4d7e-9f6a-2c1d3e4f5a6b", "/blob/{id}"},
		{"/sha/9b74c9897bac770ffc029102a200c5de", "/sha/{id}"},
		{"/static/app.css", "/static/app.css"},
		{"http://example.com/a/1", "/a/{id}"},
		{"*", "*"},
		{"/day/2026-11-23/report", "/day/{id}/report"},
	} {
		if got := PathTemplate(c.in); got != c.want {
			t.Errorf("PathTemplate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
