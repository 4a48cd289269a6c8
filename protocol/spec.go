package protocol

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Spec describes a wire protocol as data: header layout and endianness, magic, which field is
// the size and what it counts, where the command id is and the commands' names, which commands
// are answered (per protocol version), and which command opens a unit of work. The built-in
// protocols are specs too (protocol/protocols/*.json); docs/protocol-spec.md documents the format.
type Spec struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"` // protocol version the spec describes ("5.0")
	// Kind is "binary" (header-described frames, the default), "resp" (Redis), "http"
	// (HTTP/1.1), "line" (a line-based text protocol described by Line), or "raw" (no
	// decoding: every call is one message).
	Kind string `json:"kind,omitempty"`
	// Line describes a protocol of kind "line".
	Line   *LineSpec `json:"line,omitempty"`
	Endian string    `json:"endian,omitempty"` // "little" (default) or "big"
	// Request describes frames in the requesting direction (the side that speaks first on a
	// connection); Reply frames in the other direction. A nil Reply means: same as Request.
	Request *Header `json:"request,omitempty"`
	Reply   *Header `json:"reply,omitempty"`
	// MaxFrame is the largest frame size believed, in bytes; a larger size means lost sync.
	MaxFrame int64 `json:"max_frame,omitempty"`
	// DefaultReply says whether a command not named in NoReply gets a reply.
	DefaultReply bool          `json:"default_reply"`
	Commands     []CommandSpec `json:"commands,omitempty"`
	// NoReply lists, per protocol version, the commands that get no reply. The rule with the
	// highest MinVersion not above the connection's version applies; the connection's version
	// comes from the reply to VersionCommand, or is Version when none was seen.
	NoReply        []NoReplyRule `json:"no_reply,omitempty"`
	VersionCommand string        `json:"version_command,omitempty"` // "HELLO"
	// VersionField is where the reply to VersionCommand holds major, minor and patch (one byte
	// each), counted from the start of the reply frame.
	VersionField *Field `json:"version_field,omitempty"`
	// Records, when set, says that a frame's payload is a sequence of records (commands), each
	// with its own header; the decoder walks those within the captured head to learn whether a
	// frame wants a reply and which request id labels it.
	Records *RecordLayout `json:"records,omitempty"`
	// Stream, when "venus", says that a request frame's payload is a real Venus command stream
	// (commands back to back without sizes); the decoder splits it with the Venus argument
	// layouts generated from vk.xml (venus-mesa).
	Stream string `json:"stream,omitempty"`
	// UnitCommands name the commands each of which opens one unit of work (a decode step);
	// UnitName is the unit's name ("token").
	UnitCommands []string `json:"unit_commands,omitempty"`
	UnitName     string   `json:"unit_name,omitempty"`
	// SubmitCommands and SyncCommands class the calls of a token loop by name, for the what-if
	// model (perflab model): a submit closes a coalesced frame and is not waited for when
	// pipelined; a sync call is one whose result the application needs at once (a fence wait,
	// a read of device memory). Every other command is async (CallClass).
	SubmitCommands []string `json:"submit_commands,omitempty"`
	SyncCommands   []string `json:"sync_commands,omitempty"`

	byID     map[uint64]*CommandSpec
	dense    []*CommandSpec // byID by index, for the ids under maxDense
	rules    []NoReplyRule  // sorted by version
	unitIDs  map[uint64]bool
	classes  map[string]CallClass
	verCmdID uint64
	hasVer   bool
	defVer   [3]int
}

// Header is the layout of a frame header. Offsets count from the start of the frame.
type Header struct {
	Bytes   int    `json:"bytes"`             // header length
	Magic   *Field `json:"magic,omitempty"`   // Value is the expected magic
	Size    Field  `json:"size"`              // the size field
	Counts  string `json:"counts,omitempty"`  // what Size counts: "payload" (default) or "frame"
	Command *Field `json:"command,omitempty"` // the command id (may lie in the payload)
	Flags   *Field `json:"flags,omitempty"`   // flags; Mask selects the "wants a reply" bit
	ReqID   *Field `json:"req_id,omitempty"`  // request id, when the protocol has one
}

// Field is an unsigned integer field of a frame.
type Field struct {
	Offset int    `json:"offset"`
	Size   int    `json:"size"`            // 1, 2, 4 or 8 bytes
	Value  uint64 `json:"value,omitempty"` // magic: the expected value
	Mask   uint64 `json:"mask,omitempty"`  // flags: the bit that asks for a reply
}

// RecordLayout describes the records of a payload. Field offsets count from the start of the
// record.
type RecordLayout struct {
	Offset    int    `json:"offset"`               // where the first record starts in the frame
	Bytes     int    `json:"bytes"`                // record header length
	Size      Field  `json:"size"`                 // bytes that follow the record header
	Flags     *Field `json:"flags,omitempty"`      // Mask: the record wants a reply
	ReplyMask uint64 `json:"reply_mask,omitempty"` // flag bits of a reply record
	SkipMask  uint64 `json:"skip_mask,omitempty"`  // flag bits of records that label nothing (a deferred error)
	ReqID     *Field `json:"req_id,omitempty"`
}

// CommandSpec names one command id.
type CommandSpec struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
}

// NoReplyRule lists the commands that get no reply from MinVersion on.
type NoReplyRule struct {
	MinVersion string   `json:"min_version"` // "3.0"
	Commands   []string `json:"commands"`
	v          [3]int
	ids        map[uint64]bool
}

//go:embed protocols/*.json
var builtinFS embed.FS

// Builtins lists the names of the built-in protocols, besides "auto".
func Builtins() []string {
	return []string{"venus", "venus-mesa", "ggml-rpc", "resp", "http", "memcached", "raw"}
}

var (
	builtinMu    sync.Mutex
	builtinCache = map[string]*Spec{}
)

// BuiltinSpec returns the built-in spec called name. Specs are read-only once parsed, so the
// same one is shared.
func BuiltinSpec(name string) (*Spec, error) {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	if s, ok := builtinCache[name]; ok {
		return s, nil
	}
	s, err := parseBuiltin(name)
	if err != nil {
		return nil, err
	}
	builtinCache[name] = s
	return s, nil
}

func parseBuiltin(name string) (*Spec, error) {
	b, err := builtinFS.ReadFile("protocols/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("protocol %q unknown (want auto, %s)", name, strings.Join(Builtins(), ", "))
	}
	return ParseSpec(bytes.NewReader(b))
}

// LoadSpec reads a spec from a JSON file.
func LoadSpec(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	s, err := ParseSpec(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return s, nil
}

// ParseSpec decodes and checks a JSON spec.
func ParseSpec(r io.Reader) (*Spec, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse protocol spec: %w", err)
	}
	if err := s.init(); err != nil {
		return nil, fmt.Errorf("check protocol spec: %w", err)
	}
	return &s, nil
}

func checkField(name string, f *Field, limit int) error {
	if f == nil {
		return nil
	}
	switch f.Size {
	case 1, 2, 4, 8:
	default:
		return fmt.Errorf("%s: size %d, want 1, 2, 4 or 8", name, f.Size)
	}
	if f.Offset < 0 || f.Offset+f.Size > limit {
		return fmt.Errorf("%s: offset %d outside the first %d bytes", name, f.Offset, limit)
	}
	return nil
}

// maxPeek bounds how far into a frame fields may lie: they must be in the payload head a
// trace keeps.
const maxPeek = 64

func (s *Spec) init() error {
	if err := s.initKind(); err != nil {
		return err
	}
	if s.MaxFrame <= 0 {
		s.MaxFrame = 1 << 32
	}
	if s.Kind == "binary" {
		if err := s.initFrames(); err != nil {
			return err
		}
	}
	if err := s.initCommands(); err != nil {
		return err
	}
	return s.initClasses()
}

// initKind checks the spec's name, kind (and line section), endian and stream.
func (s *Spec) initKind() error {
	if s.Name == "" {
		return fmt.Errorf("name missing")
	}
	if err := oneOf("kind", &s.Kind, "binary", "binary, resp, http, line or raw", "binary", "resp", "http", "line", "raw"); err != nil {
		return err
	}
	if s.Kind == "line" {
		if s.Line == nil {
			return fmt.Errorf("kind line without a line section")
		}
		if err := s.Line.init(); err != nil {
			return err
		}
	}
	if err := oneOf("endian", &s.Endian, "little", "little or big", "little", "big"); err != nil {
		return err
	}
	if err := oneOf("stream", &s.Stream, "", "venus or nothing", "", "venus"); err != nil {
		return err
	}
	return nil
}

// initFrames checks the headers and records of a binary protocol: every field within the
// header, or within the payload head a trace keeps.
func (s *Spec) initFrames() error {
	if s.Request == nil {
		return fmt.Errorf("request header missing")
	}
	if s.Reply == nil {
		s.Reply = s.Request
	}
	for _, h := range []*Header{s.Request, s.Reply} {
		if err := checkHeader(h); err != nil {
			return err
		}
	}
	if err := checkField("version_field", s.VersionField, maxPeek); err != nil {
		return err
	}
	if r := s.Records; r != nil {
		return checkRecords(r)
	}
	return nil
}

// checkHeader checks a frame header's length and fields.
func checkHeader(h *Header) error {
	if h.Bytes <= 0 || h.Bytes > maxPeek {
		return fmt.Errorf("header bytes %d, want 1..%d", h.Bytes, maxPeek)
	}
	if err := checkField("size", &h.Size, h.Bytes); err != nil {
		return err
	}
	if err := checkField("magic", h.Magic, h.Bytes); err != nil {
		return err
	}
	for n, f := range map[string]*Field{"command": h.Command, "flags": h.Flags, "req_id": h.ReqID} {
		if err := checkField(n, f, maxPeek); err != nil {
			return err
		}
	}
	if err := oneOf("counts", &h.Counts, "payload", "payload or frame", "payload", "frame"); err != nil {
		return err
	}
	return nil
}

// checkRecords checks a record layout's length, offset and fields.
func checkRecords(r *RecordLayout) error {
	if r.Bytes <= 0 || r.Bytes > maxPeek || r.Offset < 0 || r.Offset > maxPeek {
		return fmt.Errorf("records: bytes %d offset %d, want 1..%d", r.Bytes, r.Offset, maxPeek)
	}
	if err := checkField("records.size", &r.Size, r.Bytes); err != nil {
		return err
	}
	if err := checkField("records.flags", r.Flags, r.Bytes); err != nil {
		return err
	}
	if err := checkField("records.req_id", r.ReqID, r.Bytes); err != nil {
		return err
	}
	return nil
}

// maxDense bounds the command ids found by index rather than by map (Spec.command).
const maxDense = 4096

// initCommands indexes the commands by id, and resolves the names of the no-reply rules, the
// version command and the unit commands, which must be commands of the spec.
func (s *Spec) initCommands() error {
	s.byID = make(map[uint64]*CommandSpec, len(s.Commands))
	byName := map[string]uint64{}
	for i := range s.Commands {
		c := &s.Commands[i]
		if c.Name == "" {
			return fmt.Errorf("command %d has no name", c.ID)
		}
		s.byID[c.ID] = c
		byName[c.Name] = c.ID
		if c.ID < maxDense {
			s.dense = append(s.dense, make([]*CommandSpec, max(int(c.ID)+1-len(s.dense), 0))...)
			s.dense[c.ID] = c
		}
	}
	lookup := func(n string) (uint64, error) {
		id, ok := byName[n]
		if !ok {
			return 0, fmt.Errorf("command %q is not in commands", n)
		}
		return id, nil
	}
	v, err := parseVersion(s.Version)
	if err != nil {
		return err
	}
	s.defVer = v
	s.rules = append([]NoReplyRule(nil), s.NoReply...)
	for i := range s.rules {
		r := &s.rules[i]
		if r.v, err = parseVersion(r.MinVersion); err != nil {
			return err
		}
		r.ids = map[uint64]bool{}
		for _, n := range r.Commands {
			id, err := lookup(n)
			if err != nil {
				return err
			}
			r.ids[id] = true
		}
	}
	sort.SliceStable(s.rules, func(i, j int) bool { return verLess(s.rules[i].v, s.rules[j].v) })
	if s.VersionCommand != "" {
		if s.verCmdID, err = lookup(s.VersionCommand); err != nil {
			return err
		}
		if s.VersionField == nil {
			return fmt.Errorf("version_command without version_field")
		}
		s.hasVer = true
	}
	s.unitIDs = map[uint64]bool{}
	for _, n := range s.UnitCommands {
		id, err := lookup(n)
		if err != nil {
			return err
		}
		s.unitIDs[id] = true
	}
	if len(s.UnitCommands) > 0 && s.UnitName == "" {
		s.UnitName = "unit"
	}
	return nil
}

// initClasses indexes SubmitCommands and SyncCommands; a name may have one class only. The
// names need not be in Commands: a spec may class calls that only some versions of its
// protocol have.
func (s *Spec) initClasses() error {
	s.classes = map[string]CallClass{}
	for _, c := range []struct {
		what  string
		names []string
		class CallClass
	}{{"submit_commands", s.SubmitCommands, ClassSubmit}, {"sync_commands", s.SyncCommands, ClassSync}} {
		for _, n := range c.names {
			if n == "" {
				return fmt.Errorf("%s: empty name", c.what)
			}
			if _, dup := s.classes[n]; dup {
				return fmt.Errorf("%s: %q has a class already", c.what, n)
			}
			s.classes[n] = c.class
		}
	}
	return nil
}

// oneOf checks that *v is one of allowed after setting an empty *v to def; the error names the
// field (what) and the values it wants (want).
func oneOf(what string, v *string, def, want string, allowed ...string) error {
	if *v == "" {
		*v = def
	}
	if slices.Contains(allowed, *v) {
		return nil
	}
	return fmt.Errorf("%s %q, want %s", what, *v, want)
}

// CallClass says how a call relates to an application's sync points (Spec.SubmitCommands,
// Spec.SyncCommands).
type CallClass uint8

// Call classes.
const (
	ClassAsync  CallClass = iota // the application does not need its result at once
	ClassSubmit                  // a queue submission: closes a coalesced frame, not waited for when pipelined
	ClassSync                    // a sync point: the application waits for its reply
)

// CallClass returns the class of the call named name: ClassAsync unless the spec names it a
// submit or a sync command.
func (s *Spec) CallClass(name string) CallClass { return s.classes[name] }

func parseVersion(s string) ([3]int, error) {
	var v [3]int
	if s == "" {
		return v, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return v, fmt.Errorf("version %q, want MAJOR[.MINOR[.PATCH]]", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 {
			return v, fmt.Errorf("version %q, want MAJOR[.MINOR[.PATCH]]", s)
		}
		v[i] = n
	}
	return v, nil
}

func verLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// CommandName returns the name of command id, or "" when the spec does not name it.
func (s *Spec) CommandName(id uint64) string {
	if c := s.command(id); c != nil {
		return c.Name
	}
	return ""
}

// command returns the command of id, nil when the spec has none.
func (s *Spec) command(id uint64) *CommandSpec {
	if id < uint64(len(s.dense)) {
		return s.dense[id]
	}
	return s.byID[id]
}

// WantsReply reports whether command id gets a reply at protocol version v.
func (s *Spec) WantsReply(id uint64, v [3]int) bool {
	var rule *NoReplyRule
	for i := range s.rules {
		if !verLess(v, s.rules[i].v) {
			rule = &s.rules[i]
		}
	}
	if rule != nil && rule.ids[id] {
		return false
	}
	return s.DefaultReply
}

// recordInfo is what walking a frame's records tells.
type recordInfo struct {
	parsed  int    // records whose header was within the head
	wants   bool   // a record wants a reply
	reply   bool   // a record is a reply
	reqID   uint64 // the request id that labels the frame
	labeled bool
	// complete: the walk reached the frame's end, so every record was seen
	complete bool
	// replyIDs are the request ids of the reply records (not skipped), at most maxReplyIDs
	replyIDs [maxReplyIDs]uint64
	nReply   int
}

// maxReplyIDs bounds the reply records of one frame that are paired.
const maxReplyIDs = 16

// walkRecords walks the records of a frame whose first bytes are head, into ri, which is
// zero (a pointer: the record info is large, and most frames have no record in their head).
func (s *Spec) walkRecords(ri *recordInfo, head []byte, frameLen int64) {
	r := s.Records
	if r == nil || len(head) < r.Offset+r.Bytes {
		return
	}
	big := s.Endian == "big"
	get := func(b []byte, f *Field) uint64 { return fieldValue(b, f, big) }
	var firstID uint64
	for off := r.Offset; off+r.Bytes <= len(head) && ri.parsed < 1<<16; {
		rec := head[off : off+r.Bytes]
		ri.parsed++
		var flags, id uint64
		if r.Flags != nil {
			flags = get(rec, r.Flags)
		}
		if r.ReqID != nil {
			id = get(rec, r.ReqID)
		}
		if ri.parsed == 1 {
			firstID = id
		}
		if r.Flags != nil && flags&r.Flags.Mask != 0 {
			if !ri.wants && !ri.labeled {
				ri.reqID, ri.labeled = id, true
			}
			ri.wants = true
		}
		if r.ReplyMask != 0 && flags&r.ReplyMask != 0 {
			ri.reply = true
			if flags&r.SkipMask == 0 && ri.nReply < maxReplyIDs {
				ri.replyIDs[ri.nReply] = id
				ri.nReply++
			}
			if flags&r.SkipMask == 0 && !ri.labeled {
				ri.reqID, ri.labeled = id, true
			}
		}
		next := r.next(rec, off, big)
		if next == uint64(frameLen) {
			ri.complete = true
		}
		if next > uint64(len(head)) {
			break
		}
		off = int(next)
	}
	if !ri.labeled && ri.parsed > 0 {
		ri.reqID = firstID
	}
}

// OpensUnit reports whether command id opens a unit of work.
func (s *Spec) OpensUnit(id uint64) bool { return s.unitIDs[id] }
