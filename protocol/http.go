package protocol

import (
	"bytes"
	"strconv"
	"strings"
)

// httpProto is the grammar of one direction of an HTTP/1.1 connection: requests (a request
// line, headers, a body by Content-Length or chunked) or responses (a status line, headers, a
// body by Content-Length, chunked, or up to the end of the connection). Requests are named
// "METHOD /path/template", with the ids and numbers of the path collapsed ("/users/{id}") so
// that endpoints group; responses carry their request's name and their status.
type httpProto struct {
	c       *connDecoder
	resp    bool // this direction carries responses
	decided bool // replies is known (from the first message's first bytes)
	state   int
	length  int64 // Content-Length, -1 when absent
	chunked bool
	close   bool // Connection: close, or HTTP/1.0 without keep-alive
	http10  bool
	noBody  bool // a response that has no body (1xx, 204, 304, to HEAD)
	interim bool // a 1xx response
}

const (
	hsStart   = iota // the request or status line
	hsHeaders        // header lines up to the empty line
	hsChunk          // a chunk-size line
	hsTrailer        // trailer lines up to the empty line
)

func newHTTPProto(c *connDecoder, first []byte) *httpProto {
	p := &httpProto{c: c}
	if len(first) >= 5 {
		p.resp, p.decided = bytes.HasPrefix(first, []byte("HTTP/")), true
	}
	return p
}

// httpMethods are the request methods a call may start with (RFC 9110 and WebDAV's commonest).
var httpMethods = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE",
	"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "REPORT", "SEARCH"}

// httpMethod returns the length of the method that p starts with, followed by a space, or 0.
func httpMethod(p []byte) int {
	for _, m := range httpMethods {
		if len(p) > len(m) && p[len(m)] == ' ' && string(p[:len(m)]) == m {
			return len(m)
		}
	}
	return 0
}

// isHTTPStart reports whether p starts an HTTP/1.x request ("GET /") or response ("HTTP/1.").
func isHTTPStart(p []byte) bool {
	if bytes.HasPrefix(p, []byte("HTTP/1.")) {
		return true
	}
	n := httpMethod(p)
	return n > 0 && len(p) > n+1 && (p[n+1] == '/' || p[n+1] == '*' || p[n+1] == 'h')
}

func (p *httpProto) replies() bool { return p.resp }

func (p *httpProto) reset() { p.state = hsStart }

func (p *httpProto) starts(b []byte) bool {
	if !p.decided {
		return isHTTPStart(b)
	}
	if p.resp {
		return bytes.HasPrefix(b, []byte("HTTP/1."))
	}
	return httpMethod(b) > 0
}

func (p *httpProto) line(st *textStream, l []byte) {
	switch p.state {
	case hsStart:
		if len(l) == 0 && st.size <= 2 { // a stray CRLF between messages (RFC 9112 §2.2)
			st.open = false
			return
		}
		if !p.decided {
			p.resp, p.decided = bytes.HasPrefix(l, []byte("HTTP/")), true
		}
		if !p.starts(l) { // no request or status line: not HTTP, or the framing is lost
			st.reject()
			return
		}
		p.length, p.chunked, p.close, p.noBody, p.interim = -1, false, false, false, false
		if p.resp {
			p.statusLine(st, l)
		} else {
			p.requestLine(st, l)
		}
		if st.lost {
			return
		}
		p.state = hsHeaders
	case hsHeaders:
		if len(l) == 0 {
			p.headersDone(st)
			return
		}
		p.header(l)
	case hsChunk:
		size, ok := chunkSize(l)
		switch {
		case !ok: // not a chunk-size line: the framing is lost
			st.blindSpells++
			st.blind = true
			p.state = hsStart
		case size == 0:
			p.state = hsTrailer
		default:
			st.skip = size + 2 // the data and its CRLF
		}
	case hsTrailer:
		if len(l) == 0 {
			p.state = hsStart
			st.complete = true
		}
	}
}

func (p *httpProto) bodyDone(st *textStream) {
	if p.state == hsChunk {
		return // the next chunk-size line follows
	}
	p.state = hsStart
	st.complete = true
}

func (p *httpProto) requestLine(st *textStream, l []byte) {
	st.isReply, st.wantsReply = false, true
	if !bytes.HasSuffix(l, []byte(" HTTP/1.1")) && !bytes.HasSuffix(l, []byte(" HTTP/1.0")) {
		st.reject() // no HTTP/1.x request line
		return
	}
	sp := bytes.IndexByte(l, ' ')
	method := string(l[:sp])
	target := l[sp+1:]
	if i := bytes.LastIndexByte(target, ' '); i >= 0 {
		p.http10 = bytes.HasSuffix(target, []byte("HTTP/1.0"))
		target = target[:i]
	}
	st.name = method + " " + PathTemplate(string(target))
}

func (p *httpProto) statusLine(st *textStream, l []byte) {
	st.isReply = true
	p.http10 = bytes.HasPrefix(l, []byte("HTTP/1.0"))
	if len(l) >= 12 && l[8] == ' ' {
		if code, err := strconv.Atoi(string(l[9:12])); err == nil && code >= 100 && code <= 999 {
			st.status = code
		}
	}
	switch {
	case st.status == 101: // Switching Protocols: the final answer; what follows is no HTTP
		p.noBody = true
	case st.status >= 100 && st.status < 200: // interim: the final response follows
		p.noBody, p.interim = true, true
		st.noPair = true
	case st.status == 204 || st.status == 304:
		p.noBody = true
	case strings.HasPrefix(p.c.peekName(), "HEAD "):
		p.noBody = true
	}
	if p.http10 {
		p.close = true
	}
}

func (p *httpProto) header(l []byte) {
	colon := bytes.IndexByte(l, ':')
	if colon <= 0 {
		return
	}
	name := l[:colon]
	val := bytes.TrimSpace(l[colon+1:])
	switch {
	case asciiEqualFold(name, "content-length"):
		if n, err := strconv.ParseInt(string(val), 10, 64); err == nil && n >= 0 {
			p.length = n
		}
	case asciiEqualFold(name, "transfer-encoding"):
		v := strings.ToLower(string(val))
		p.chunked = strings.HasSuffix(strings.TrimSpace(v), "chunked")
	case asciiEqualFold(name, "connection"):
		v := strings.ToLower(string(val))
		if strings.Contains(v, "close") {
			p.close = true
		} else if strings.Contains(v, "keep-alive") {
			p.close = false
		}
	}
}

func (p *httpProto) headersDone(st *textStream) {
	switch {
	case p.noBody:
		p.state = hsStart
		st.complete = true
	case p.chunked:
		p.state = hsChunk
	case p.length > 0:
		p.state = hsStart
		st.skip = p.length
	case p.length == 0 || !p.resp:
		p.state = hsStart
		st.complete = true // a request without a length has no body
	default: // a response without a length: its body runs until the connection closes
		p.state = hsStart
		st.toEOF = true
	}
}

// chunkSize parses a chunk-size line: hex digits, then optional extensions after ';'.
func chunkSize(l []byte) (int64, bool) {
	if i := bytes.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	l = bytes.TrimSpace(l)
	if len(l) == 0 || len(l) > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(l), 16, 64)
	return n, err == nil && n >= 0
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x := b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != s[i] {
			return false
		}
	}
	return true
}

// maxTemplate bounds the length of a path template, in bytes.
const maxTemplate = 96

// PathTemplate returns the path of an HTTP request target with the query dropped and every
// segment that is an id or a number replaced by "{id}": all digits, a UUID, a long hex string,
// or a long token mixing letters and digits. "/users/42/posts?x=1" gives "/users/{id}/posts".
// An absolute-form target ("http://host/p") gives its path. Long templates are cut.
func PathTemplate(target string) string {
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		rest := target[strings.Index(target, "//")+2:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			target = rest[i:]
		} else {
			target = "/"
		}
	}
	if target == "" || target == "*" {
		return target
	}
	var b strings.Builder
	segs := strings.Split(target, "/")
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		if isIDSegment(s) {
			b.WriteString("{id}")
		} else {
			b.WriteString(s)
		}
		if b.Len() > maxTemplate {
			return b.String()[:maxTemplate] + "…"
		}
	}
	return b.String()
}

// isIDSegment reports whether a path segment looks like an identifier or a number.
func isIDSegment(s string) bool {
	if s == "" {
		return false
	}
	digits, hex, other := 0, 0, 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= '0' && ch <= '9':
			digits++
		case ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F':
			hex++
		case ch == '-' || ch == '_' || ch == '.':
		default:
			other++
		}
	}
	switch {
	case digits > 0 && hex == 0 && other == 0:
		return true // 42, 3.14, 2026-11-23
	case digits > 0 && other == 0 && len(s) >= 8:
		return true // a UUID, a hex digest
	case digits >= 2 && len(s) >= 16:
		return true // a long token with digits
	}
	return false
}
