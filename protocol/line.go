package protocol

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// LineSpec describes a line-based request/reply protocol (spec kind "line"): every message
// starts with a line whose first word names it, lines end with Terminator, and a line may
// announce a body of a byte count given by one of its arguments (memcached's
// "set k 0 0 5\r\nhello\r\n"). A reply is any number of "more" lines (each with its body)
// followed by one final line; replies come in the order of the requests that want one.
type LineSpec struct {
	// Terminator ends every line: "\r\n" (the default) or "\n".
	Terminator string `json:"terminator,omitempty"`
	// BodyTerminated says that a body is followed by a Terminator, counted apart from its
	// length (memcached's data blocks are).
	BodyTerminated bool `json:"body_terminated,omitempty"`
	// CaseInsensitive matches command words regardless of case (SMTP); the default is exact.
	CaseInsensitive bool `json:"case_insensitive,omitempty"`
	// NoReplyArg is an argument that, present on a request line, says no reply will come
	// (memcached's "noreply").
	NoReplyArg string `json:"no_reply_arg,omitempty"`
	// NumericReplies accepts a reply line that is a number (memcached's incr/decr) or starts
	// with one (SMTP's "250 OK") as a final reply line.
	NumericReplies bool `json:"numeric_replies,omitempty"`
	// Requests are the command words of requests; Replies the first words of reply lines.
	// A line whose first word is in neither is taken as lost framing.
	Requests []LineCommand `json:"requests"`
	Replies  []LineCommand `json:"replies"`

	reqs, reps map[string]*LineCommand
	// constrained: some command has Answers or AnsweredBy, and replies are paired through
	// answers; quiet: some request has a QuietFlag
	constrained, quiet bool
}

// LineCommand is one command word of a line protocol.
type LineCommand struct {
	Word string `json:"word"`
	// LengthArg, when above 0, is the argument (1 is the first after the word) that gives the
	// byte count of a body following the line.
	LengthArg int `json:"length_arg,omitempty"`
	// NoReply: a request that is never answered ("quit").
	NoReply bool `json:"no_reply,omitempty"`
	// More: a reply line that the reply continues after ("VALUE", "STAT"); the reply ends with
	// the first line that is not More ("END").
	More bool `json:"more,omitempty"`
	// QuietFlag, on a request, is an argument after the first that makes the request quiet: it
	// is answered only when the answer says something (memcached's meta commands with "q": a
	// miss or a success is not sent). A quiet request wants no reply for certain; a reply that
	// answers a later request says the quiet ones before it got none.
	QuietFlag string `json:"quiet_flag,omitempty"`
	// Answers, on a reply, names the only requests it answers (memcached's "MN" answers "mn");
	// AnsweredBy, on a request, the only replies that answer it. Empty: any.
	Answers    []string `json:"answers,omitempty"`
	AnsweredBy []string `json:"answered_by,omitempty"`
}

// maxLineWord bounds a command word, in bytes.
const maxLineWord = 32

func (l *LineSpec) init() error {
	if err := oneOf("line.terminator", &l.Terminator, "\r\n", `"\r\n" or "\n"`, "\r\n", "\n"); err != nil {
		return err
	}
	if len(l.Requests) == 0 {
		return fmt.Errorf("line.requests: no command words")
	}
	mk := func(what string, cmds []LineCommand) (map[string]*LineCommand, error) {
		m := make(map[string]*LineCommand, len(cmds))
		for i := range cmds {
			c := &cmds[i]
			w := c.Word
			if w == "" || len(w) > maxLineWord || strings.ContainsAny(w, " \t\r\n") {
				return nil, fmt.Errorf("line.%s: word %q, want 1..%d bytes without blanks", what, w, maxLineWord)
			}
			if c.LengthArg < 0 || c.LengthArg > 64 {
				return nil, fmt.Errorf("line.%s: %s: length_arg %d, want 0..64", what, w, c.LengthArg)
			}
			if l.CaseInsensitive {
				w = strings.ToLower(w)
			}
			if _, dup := m[w]; dup {
				return nil, fmt.Errorf("line.%s: word %q twice", what, c.Word)
			}
			m[w] = c
		}
		return m, nil
	}
	var err error
	if l.reqs, err = mk("requests", l.Requests); err != nil {
		return err
	}
	if l.reps, err = mk("replies", l.Replies); err != nil {
		return err
	}
	for _, c := range [...]struct {
		what  string
		cmds  []LineCommand
		other map[string]*LineCommand
		list  func(*LineCommand) []string
	}{
		{"replies", l.Replies, l.reqs, func(c *LineCommand) []string { return c.Answers }},
		{"requests", l.Requests, l.reps, func(c *LineCommand) []string { return c.AnsweredBy }},
	} {
		for i := range c.cmds {
			for _, w := range c.list(&c.cmds[i]) {
				if l.lookupWord(c.other, w) == nil {
					return fmt.Errorf("line.%s: %s: %q is no command word of the other direction", c.what, c.cmds[i].Word, w)
				}
				l.constrained = true
			}
			if q := c.cmds[i].QuietFlag; q != "" {
				if len(q) > maxLineWord || strings.ContainsAny(q, " \t\r\n") {
					return fmt.Errorf("line.%s: %s: quiet_flag %q, want 1..%d bytes without blanks", c.what, c.cmds[i].Word, q, maxLineWord)
				}
				l.quiet = true
			}
		}
	}
	return nil
}

// answers reports whether a reply whose first word is reply may answer the request named req
// (both words of the spec).
func (l *LineSpec) answers(reply, req string) bool {
	rp, rq := l.lookupWord(l.reps, reply), l.lookupWord(l.reqs, req)
	if rp != nil && len(rp.Answers) > 0 && !l.among(req, rp.Answers) {
		return false
	}
	if rq != nil && len(rq.AnsweredBy) > 0 && !l.among(reply, rq.AnsweredBy) {
		return false
	}
	return true
}

// among reports whether word w is one of words, as the spec compares words.
func (l *LineSpec) among(w string, words []string) bool {
	for _, x := range words {
		if x == w || l.CaseInsensitive && strings.EqualFold(x, w) {
			return true
		}
	}
	return false
}

// lookupWord is lookup of a word held as a string.
func (l *LineSpec) lookupWord(m map[string]*LineCommand, w string) *LineCommand {
	if l.CaseInsensitive {
		w = strings.ToLower(w)
	}
	return m[w]
}

// word returns the first word of a line and the rest.
func firstWord(b []byte) ([]byte, []byte) {
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

func (l *LineSpec) lookup(m map[string]*LineCommand, w []byte) *LineCommand {
	if len(w) == 0 || len(w) > maxLineWord {
		return nil
	}
	if l.CaseInsensitive {
		return m[strings.ToLower(string(w))]
	}
	return m[string(w)]
}

// lineProto is the grammar of one direction of a line protocol.
type lineProto struct {
	ls       *LineSpec
	requests bool
}

func newLineProto(s *Spec, requests bool) *lineProto {
	return &lineProto{ls: s.Line, requests: requests}
}

// numeric reports whether w is a number ("5", "250-").
func numeric(w []byte) bool {
	if len(w) == 0 || w[0] < '0' || w[0] > '9' {
		return false
	}
	for _, ch := range w {
		if (ch < '0' || ch > '9') && ch != '-' {
			return false
		}
	}
	return true
}

func (p *lineProto) replies() bool { return !p.requests }

func (p *lineProto) reset() {}

func (p *lineProto) starts(b []byte) bool {
	w, _ := firstWord(bytes.TrimRight(firstLine(b), "\r\n"))
	if p.requests {
		return p.ls.lookup(p.ls.reqs, w) != nil
	}
	return p.ls.lookup(p.ls.reps, w) != nil || p.ls.NumericReplies && numeric(w)
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return b
}

func (p *lineProto) line(st *textStream, l []byte) {
	w, rest := firstWord(l)
	var cmd *LineCommand
	if p.requests {
		cmd = p.ls.lookup(p.ls.reqs, w)
	} else {
		cmd = p.ls.lookup(p.ls.reps, w)
	}
	if cmd == nil && !(!p.requests && p.ls.NumericReplies && numeric(w)) {
		st.reject()
		return
	}
	if p.requests {
		st.isReply = false
		st.name = cmd.Word
		st.wantsReply = !cmd.NoReply && !(p.ls.NoReplyArg != "" && hasArg(rest, p.ls.NoReplyArg))
		if cmd.QuietFlag != "" && st.wantsReply {
			if _, flags := firstWord(rest); hasArg(flags, cmd.QuietFlag) {
				st.wantsReply, st.quiet = false, true
			}
		}
	} else {
		st.isReply = true
		if st.name == "" {
			st.name = string(w)
		}
	}
	if cmd != nil && cmd.LengthArg > 0 {
		if n, ok := lineArg(rest, cmd.LengthArg); ok {
			if n >= 0 {
				if p.ls.BodyTerminated {
					n += int64(len(p.ls.Terminator))
				}
				if n > 0 {
					st.skip = n
					p.setMore(st, cmd)
					return
				}
			}
		} else { // a length that is no number: the framing is lost
			st.reject()
			return
		}
	}
	p.setMore(st, cmd)
}

// setMore decides, after a line (and before its body, if any), whether the message ends.
func (p *lineProto) setMore(st *textStream, cmd *LineCommand) {
	more := !p.requests && cmd != nil && cmd.More
	if st.skip > 0 {
		st.moreAfter = more
		return
	}
	st.complete = !more
}

func (p *lineProto) bodyDone(st *textStream) {
	st.complete = !st.moreAfter
	st.moreAfter = false
}

// hasArg reports whether the space-separated args hold a.
func hasArg(args []byte, a string) bool {
	for len(args) > 0 {
		var w []byte
		w, args = firstWord(args)
		if string(w) == a {
			return true
		}
	}
	return false
}

// lineArg returns argument k (1-based) of args as a count of bytes.
func lineArg(args []byte, k int) (int64, bool) {
	for i := 1; len(args) > 0; i++ {
		var w []byte
		w, args = firstWord(args)
		if i == k {
			n, err := strconv.ParseInt(string(w), 10, 64)
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}
