package protocol

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Real Venus command streams (Mesa's Venus protocol, as Venus Plus sends it in its frames). A
// stream is commands back to back, with no size per command: u32 VkCommandTypeEXT, u32 flags
// (bit 0: a reply is wanted), then the arguments in Venus encoding. Telling where one command
// ends takes its argument layout: protocols/venus-mesa.layout, generated from vk.xml by
// internal/cmd/venusgen (docs/protocol-spec.md, "venus-mesa").

//go:embed protocols/venus-mesa.layout
var venusLayoutText string

// vop is one step of a Venus layout.
type vop struct {
	kind byte     // '4' '8' scalar, 's' string, 'b' byte blob, 'h' u16 blob, 'x' chain, 'y' partial chain, 'T' struct, 'P' partial struct, 'p' optional, 'a' array, '?' unknown
	sub  []vop    // p, a: the contents
	st   *vstruct // T, P
	name string   // T, P: the struct's name, until linked
}

// vstruct is the layout of a Vulkan struct or union.
type vstruct struct {
	name     string
	hasSType bool
	sType    uint32
	self     []vop   // members after sType and pNext
	partial  []vop   // the same, as an output struct (Venus's "partial" encoding)
	union    [][]vop // a union: one layout per tag
}

type venusLayout struct {
	structs map[string]*vstruct
	bySType map[uint32]*vstruct
	cmds    map[uint32][]vop // nil ops: layout unknown
	known   map[uint32]bool
}

var (
	venusOnce sync.Once
	venusLay  *venusLayout
	venusErr  error
)

// venusLayouts returns the parsed layouts, shared and read-only.
func venusLayouts() (*venusLayout, error) {
	venusOnce.Do(func() { venusLay, venusErr = parseVenusLayout(venusLayoutText) })
	return venusLay, venusErr
}

func parseVenusLayout(text string) (*venusLayout, error) {
	l := &venusLayout{structs: map[string]*vstruct{}, bySType: map[uint32]*vstruct{}, cmds: map[uint32][]vop{}, known: map[uint32]bool{}}
	for i, ln := range strings.Split(text, "\n") {
		if ln == "" || ln[0] == '#' {
			continue
		}
		if err := l.parseLine(ln, i+1); err != nil {
			return nil, err
		}
	}
	for _, s := range l.structs {
		l.link(s.self)
		l.link(s.partial)
		for _, u := range s.union {
			l.link(u)
		}
	}
	for id, ops := range l.cmds {
		l.link(ops)
		if hasUnknown(ops) {
			delete(l.cmds, id)
		}
	}
	return l, nil
}

// parseLine adds line number line of the layout, ln: a struct (S), a union (U) or a command (C).
func (l *venusLayout) parseLine(ln string, line int) error {
	f := strings.Split(ln, "\t")
	switch {
	case f[0] == "S" && len(f) == 5:
		s := &vstruct{name: f[1]}
		if f[2] != "-" {
			v, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return fmt.Errorf("venus layout line %d: sType %q", line, f[2])
			}
			s.hasSType, s.sType = true, uint32(v)
			l.bySType[s.sType] = s
		}
		var err error
		if s.self, err = parseLayoutOps(f[3], line); err != nil {
			return err
		}
		if s.partial, err = parseLayoutOps(f[4], line); err != nil {
			return err
		}
		l.structs[s.name] = s
	case f[0] == "U" && len(f) == 3:
		s := &vstruct{name: f[1]}
		for _, alt := range strings.Split(f[2], "|") {
			ops, err := parseLayoutOps(alt, line)
			if err != nil {
				return err
			}
			s.union = append(s.union, ops)
		}
		l.structs[s.name] = s
	case f[0] == "C" && len(f) == 4:
		id, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			return fmt.Errorf("venus layout line %d: command id %q", line, f[1])
		}
		ops, err := parseLayoutOps(f[3], line)
		if err != nil {
			return err
		}
		l.known[uint32(id)] = true
		if !hasUnknown(ops) {
			if ops == nil {
				ops = []vop{}
			}
			l.cmds[uint32(id)] = ops
		}
	default:
		return fmt.Errorf("venus layout line %d: %q", line, ln)
	}
	return nil
}

// parseLayoutOps parses the ops of a layout field ("-": none) on line number line.
func parseLayoutOps(s string, line int) ([]vop, error) {
	if s == "-" {
		return nil, nil
	}
	ops, rest, err := parseOps(s)
	if err == nil && rest != "" {
		err = fmt.Errorf("unexpected %q", rest)
	}
	if err != nil {
		return nil, fmt.Errorf("venus layout line %d: %w", line, err)
	}
	return ops, nil
}

func hasUnknown(ops []vop) bool {
	for _, o := range ops {
		if o.kind == '?' || hasUnknown(o.sub) {
			return true
		}
	}
	return false
}

// parseOps parses ops up to a ')' or '|' or the end; it returns the rest.
func parseOps(s string) ([]vop, string, error) {
	var ops []vop
	for s != "" {
		c := s[0]
		switch c {
		case ')', '|':
			return ops, s, nil
		case '4', '8', 's', 'b', 'h', 'x', 'y', '?':
			ops = append(ops, vop{kind: c})
			s = s[1:]
		case 'T', 'P':
			end := strings.IndexByte(s, ')')
			if len(s) < 3 || s[1] != '(' || end < 0 {
				return nil, s, fmt.Errorf("bad struct reference %q", s)
			}
			ops = append(ops, vop{kind: c, name: s[2:end]})
			s = s[end+1:]
		case 'p', 'a':
			if len(s) < 2 || s[1] != '(' {
				return nil, s, fmt.Errorf("bad %c", c)
			}
			sub, rest, err := parseOps(s[2:])
			if err != nil {
				return nil, rest, err
			}
			if rest == "" || rest[0] != ')' {
				return nil, rest, fmt.Errorf("unclosed %c(", c)
			}
			if sub == nil {
				sub = []vop{}
			}
			ops = append(ops, vop{kind: c, sub: sub})
			s = rest[1:]
		default:
			return nil, s, fmt.Errorf("unknown op %q", c)
		}
	}
	return ops, "", nil
}

// link points the struct references of ops at their structs; a missing one becomes unknown.
func (l *venusLayout) link(ops []vop) {
	for i := range ops {
		o := &ops[i]
		if o.kind == 'T' || o.kind == 'P' {
			if o.st = l.structs[o.name]; o.st == nil {
				o.kind = '?'
			}
		}
		l.link(o.sub)
	}
}

var (
	errVenusShort = errors.New("past the captured bytes")
	errVenusBad   = errors.New("not a Venus encoding")
)

// venusWalker walks Venus-encoded arguments within the captured bytes b.
type venusWalker struct {
	l     *venusLayout
	b     []byte
	off   int
	steps int
}

// walkLimit bounds the steps of one walk, so hostile counts cannot make it spin.
const walkLimit = 1 << 16

func (w *venusWalker) take(n uint64) error {
	if n > uint64(len(w.b)-w.off) {
		return errVenusShort
	}
	w.off += int(n)
	return nil
}

func (w *venusWalker) u64() (uint64, error) {
	if len(w.b)-w.off < 8 {
		return 0, errVenusShort
	}
	v := le.Uint64(w.b[w.off:])
	w.off += 8
	return v, nil
}

func (w *venusWalker) u32() (uint32, error) {
	if len(w.b)-w.off < 4 {
		return 0, errVenusShort
	}
	v := le.Uint32(w.b[w.off:])
	w.off += 4
	return v, nil
}

func pad4(n uint64) (uint64, bool) {
	if n > 1<<40 {
		return 0, false
	}
	return (n + 3) &^ 3, true
}

func (w *venusWalker) ops(ops []vop, depth int) error {
	if depth > 24 {
		return errVenusBad
	}
	for i := range ops {
		if err := w.op(&ops[i], depth); err != nil {
			return err
		}
	}
	return nil
}

func (w *venusWalker) op(o *vop, depth int) error {
	w.steps++
	if w.steps > walkLimit {
		return errVenusBad
	}
	switch o.kind {
	case '4':
		return w.take(4)
	case '8':
		return w.take(8)
	case 's', 'b', 'h':
		n, err := w.u64()
		if err != nil {
			return err
		}
		if o.kind == 'h' {
			if n > 1<<40 {
				return errVenusBad
			}
			n *= 2
		}
		p, ok := pad4(n)
		if !ok {
			return errVenusBad
		}
		return w.take(p)
	case 'p':
		n, err := w.u64()
		if err != nil {
			return err
		}
		switch n {
		case 0:
			return nil
		case 1:
			return w.ops(o.sub, depth+1)
		}
		return errVenusBad
	case 'a':
		n, err := w.u64()
		if err != nil {
			return err
		}
		if len(o.sub) == 0 {
			return nil
		}
		if fixed, ok := fixedSize(o.sub); ok {
			if fixed == 0 {
				return nil
			}
			if n > uint64(len(w.b)) { // cannot fit in any capture: a bad count, or far past the head
				if n > 1<<32 {
					return errVenusBad
				}
				return errVenusShort
			}
			return w.take(n * uint64(fixed))
		}
		for k := uint64(0); k < n; k++ {
			if err := w.ops(o.sub, depth+1); err != nil {
				return err
			}
			if w.steps > walkLimit {
				return errVenusBad
			}
		}
		return nil
	case 'T':
		return w.structOp(o.st, false, depth)
	case 'P':
		return w.structOp(o.st, true, depth)
	case 'x', 'y':
		return w.chain(o.kind == 'y', depth)
	}
	return errVenusBad
}

func (w *venusWalker) structOp(s *vstruct, partial bool, depth int) error {
	if s == nil {
		return errVenusBad
	}
	if s.union != nil {
		tag, err := w.u32()
		if err != nil {
			return err
		}
		if int(tag) >= len(s.union) || hasUnknown(s.union[tag]) {
			return errVenusBad
		}
		return w.ops(s.union[tag], depth+1)
	}
	if s.hasSType {
		st, err := w.u32()
		if err != nil {
			return err
		}
		if st != s.sType {
			return errVenusBad
		}
		if err := w.chain(partial, depth+1); err != nil {
			return err
		}
	}
	if partial {
		return w.ops(s.partial, depth+1)
	}
	return w.ops(s.self, depth+1)
}

// chain walks a pNext chain: each link is a presence word, the sType, the rest of the chain,
// then the link's own members; a zero presence word ends it.
func (w *venusWalker) chain(partial bool, depth int) error {
	var stack [16]*vstruct
	n := 0
	for {
		p, err := w.u64()
		if err != nil {
			return err
		}
		if p == 0 {
			break
		}
		if p != 1 || n == len(stack) {
			return errVenusBad
		}
		st, err := w.u32()
		if err != nil {
			return err
		}
		s := w.l.bySType[st]
		if s == nil {
			return errVenusBad
		}
		stack[n] = s
		n++
	}
	for n > 0 {
		n--
		ops := stack[n].self
		if partial {
			ops = stack[n].partial
		}
		if err := w.ops(ops, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// fixedSize returns the bytes ops always take, when that does not depend on the data.
func fixedSize(ops []vop) (int, bool) {
	n := 0
	for i := range ops {
		switch ops[i].kind {
		case '4':
			n += 4
		case '8':
			n += 8
		case 'T', 'P':
			s := ops[i].st
			if s == nil || s.union != nil || s.hasSType {
				return 0, false
			}
			body := s.self
			if ops[i].kind == 'P' {
				body = s.partial
			}
			k, ok := fixedSize(body)
			if !ok {
				return 0, false
			}
			n += k
		default:
			return 0, false
		}
	}
	return n, true
}

// venusCmd is one command found in a Venus stream.
type venusCmd struct {
	id    uint32
	flags uint32
}

// maxBatch bounds the commands of one frame that are kept.
const maxBatch = 64

// venusSplit is what splitting the captured head of a stream found.
type venusSplit struct {
	cmds  [maxBatch]venusCmd
	n     int
	split bool // every command of the stream was found: the walk ended exactly at its end
	more  bool // the stream goes on past the last command found (unknown layout or past the head)
}

// splitVenus splits the Venus command stream whose first captured bytes are head and whose
// whole length is size.
func splitVenus(head []byte, size int64) venusSplit {
	var r venusSplit
	l, err := venusLayouts()
	if err != nil || size <= 0 {
		return r
	}
	if int64(len(head)) > size {
		head = head[:size]
	}
	w := venusWalker{l: l, b: head}
	for w.off+8 <= len(head) && r.n < maxBatch {
		id := le.Uint32(head[w.off:])
		flags := le.Uint32(head[w.off+4:])
		if !l.known[id] || flags&^1 != 0 {
			if r.n == 0 {
				r.cmds[0] = venusCmd{id, flags}
				r.n = 1
			}
			r.more = true
			return r
		}
		r.cmds[r.n] = venusCmd{id, flags}
		r.n++
		ops, ok := l.cmds[id]
		if !ok {
			r.more = true
			return r
		}
		w.off += 8
		w.steps = 0
		if err := w.ops(ops, 0); err != nil {
			r.more = true
			return r
		}
		if int64(w.off) == size {
			r.split = true
			return r
		}
	}
	r.more = true
	return r
}
