package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// CommandType is one VkCommandTypeEXT value and the command it stands for.
type CommandType struct {
	ID   uint64
	Name string // "vkCreateInstance"
}

var cmdTypeRe = regexp.MustCompile(`VK_COMMAND_TYPE_(vk\w+?)_EXT\s*=\s*(\d+)`)

// ParseCommandTypes reads the VkCommandTypeEXT enum as vn_protocol_driver_defines.h publishes
// it. Several names share a value (a core command and its KHR or EXT alias): the first one
// listed names the value. The result is sorted by value.
func ParseCommandTypes(src string) ([]CommandType, error) {
	seen := map[uint64]bool{}
	var out []CommandType
	for _, m := range cmdTypeRe.FindAllStringSubmatch(src, -1) {
		id, err := strconv.ParseUint(m[2], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse command type %s: %w", m[1], err)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, CommandType{id, m[1]})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse command types: no VK_COMMAND_TYPE_*_EXT values")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Venus Plus's own command ids (common/protocol/frame_transfer.h, VenusPlusCommandType): a frame
// that starts with one of them carries that one command in a C-struct layout.
var venusPlus = []CommandType{
	{0x10000000, "TRANSFER_MEMORY_DATA"},
	{0x10000001, "READ_MEMORY_DATA"},
	{0x10000002, "TRANSFER_MEMORY_BATCH"},
	{0x10000003, "READ_MEMORY_BATCH"},
	{0x10000010, "CREATE_SWAPCHAIN"},
	{0x10000011, "DESTROY_SWAPCHAIN"},
	{0x10000012, "ACQUIRE_IMAGE"},
	{0x10000013, "PRESENT"},
	{0x10000020, "COALESCE_SUBMIT"},
	{0x10000021, "COALESCE_WAIT"},
}

// writeSpecCommands replaces the commands of the spec at path with the Venus command types
// and Venus Plus's ids, keeping the rest of the spec.
func writeSpecCommands(path string, cmds []CommandType) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("parse spec %s: %w", path, err)
	}
	type cmd struct {
		ID   uint64 `json:"id"`
		Name string `json:"name"`
	}
	var list []cmd
	for _, c := range append(append([]CommandType(nil), cmds...), venusPlus...) {
		list = append(list, cmd(c))
	}
	spec["commands"] = list
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(spec); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// scalar returns the encoded size of a scalar type (4 or 8), or 0.
func (r *registry) scalar(t string) int {
	for i := 0; i < 8; i++ {
		switch t {
		case "uint64_t", "int64_t", "size_t", "double", "VkDeviceSize", "VkDeviceAddress", "VkFlags64":
			return 8
		case "uint32_t", "int32_t", "float", "VkBool32", "VkFlags", "VkSampleMask", "uint8_t", "int8_t",
			"uint16_t", "int16_t", "char", "int":
			return 4
		}
		if n, ok := r.enums[t]; ok {
			return n
		}
		b, ok := r.basetype[t]
		if !ok || b == "void*" {
			return 0
		}
		t = b
	}
	return 0
}

func byteish(t string) bool {
	return t == "uint8_t" || t == "int8_t" || t == "char" || t == "void"
}

// value is the op of one value of type t in full encoding.
func (r *registry) value(t string) string {
	if r.handles[t] {
		return "8"
	}
	if n := r.scalar(t); n > 0 {
		return strconv.Itoa(n)
	}
	if s := r.structs[t]; s != nil {
		return "T(" + s.name + ")"
	}
	return "?"
}

// partialValue is the op of one output value of type t: structs in their partial encoding,
// handles whole, scalars not at all.
func (r *registry) partialValue(t string) string {
	if r.handles[t] {
		return "8"
	}
	if s := r.structs[t]; s != nil && !s.union {
		return "P(" + s.name + ")"
	}
	if r.scalar(t) > 0 {
		return ""
	}
	return "?"
}

func (r *registry) arrayOf(t string) string {
	switch {
	case byteish(t):
		return "b"
	case t == "uint16_t" || t == "int16_t":
		return "h"
	}
	return "a(" + r.value(t) + ")"
}

// full is the op of member (or input parameter) m in full encoding.
func (r *registry) full(m member) string {
	switch {
	case m.name == "sType" && m.ptrs == 0:
		return "4"
	case m.name == "pNext" && m.typ == "void":
		return "x"
	case m.bitfield:
		return "?"
	case m.typ == "VkAllocationCallbacks" && m.ptrs == 1:
		return "p()"
	}
	switch m.ptrs {
	case 0:
		if m.array {
			return r.arrayOf(m.typ)
		}
		return r.value(m.typ)
	case 1:
		switch {
		case m.typ == "char" && strings.Contains(m.length, "null-terminated"):
			return "s"
		case m.length != "":
			return r.arrayOf(m.typ)
		case m.typ == "void":
			return "?"
		}
		return "p(" + r.value(m.typ) + ")"
	case 2:
		if m.typ == "char" && strings.Contains(m.length, "null-terminated") {
			return "a(s)"
		}
		if m.length != "" {
			return "a(p(" + r.value(m.typ) + "))"
		}
	}
	return "?"
}

// lenRefs returns the names that pointer members use as their len (a fixed-size array's count
// member is not sent in an output struct: the array's own size word says it).
func lenRefs(ms []member) map[string]bool {
	refs := map[string]bool{}
	for _, m := range ms {
		if m.ptrs == 0 {
			continue
		}
		for _, l := range strings.Split(m.length, ",") {
			l = strings.TrimSpace(l)
			if l != "" && l != "null-terminated" && !strings.Contains(l, "->") {
				refs[l] = true
			}
		}
	}
	return refs
}

// partial is the op of member m of an output struct.
func (r *registry) partial(m member, refs map[string]bool) string {
	switch {
	case m.name == "sType" && m.ptrs == 0:
		return "4"
	case m.name == "pNext" && m.typ == "void":
		return "y"
	case m.bitfield:
		return "?"
	}
	switch {
	case m.ptrs == 0 && m.array:
		if v := r.partialValue(m.typ); v != "" {
			return "a(" + v + ")"
		}
		return ""
	case m.ptrs == 0:
		if refs[m.name] {
			return r.value(m.typ)
		}
		if s := r.structs[m.typ]; s != nil && !s.union {
			return "P(" + s.name + ")"
		}
		return ""
	case m.length != "":
		if v := r.partialValue(m.typ); v != "" {
			return "a(" + v + ")"
		}
		return "8"
	}
	if v := r.partialValue(m.typ); v != "" && v != "?" {
		return "p(" + v + ")"
	}
	return "8"
}

// param is the op of command parameter m, whose siblings use refs as lengths.
func (r *registry) param(m member, refs map[string]bool) string {
	if m.ptrs == 0 || m.isConst || m.typ == "VkAllocationCallbacks" {
		return r.full(m)
	}
	// an output (or in/out) pointer
	switch {
	case r.handles[m.typ] && m.length != "":
		return "a(8)"
	case r.handles[m.typ]:
		return "p(8)"
	case r.structs[m.typ] != nil && m.length != "":
		return "a(" + r.partialValue(m.typ) + ")"
	case r.structs[m.typ] != nil:
		return "p(" + r.partialValue(m.typ) + ")"
	case refs[m.name] && m.ptrs == 1:
		return "p(" + r.value(m.typ) + ")"
	case m.ptrs == 1:
		return "8"
	}
	return "?"
}

func join(ops []string) string { return strings.Join(ops, "") }

// layout renders the layout file.
func (r *registry) layout(cmds []CommandType) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# venus-mesa argument layouts in Venus encoding, generated by internal/cmd/venusgen from vk.xml,\n")
	b.WriteString("# VK_EXT_command_serialization.xml and VK_MESA_venus_protocol.xml. Do not edit.\n")
	b.WriteString("# S name sType self-ops partial-self-ops | U name ops-by-tag | C id name ops (docs/protocol-spec.md)\n")
	names := make([]string, 0, len(r.structs))
	for n, s := range r.structs {
		if n == s.name { // aliases point at their target
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		s := r.structs[n]
		if s.union {
			var alts []string
			for _, m := range s.members {
				alts = append(alts, r.full(m))
			}
			fmt.Fprintf(&b, "U\t%s\t%s\n", n, strings.Join(alts, "|"))
			continue
		}
		st := "-"
		var self, part []string
		refs := lenRefs(s.members)
		for _, m := range s.members {
			if m.name == "sType" || m.name == "pNext" && m.typ == "void" {
				continue
			}
			self = append(self, r.full(m))
			part = append(part, r.partial(m, refs))
		}
		if s.sType != "" {
			v, ok := r.sTypeValue(s.sType)
			if !ok {
				return nil, fmt.Errorf("struct %s: sType %s has no value", n, s.sType)
			}
			st = strconv.FormatInt(v, 10)
		}
		fmt.Fprintf(&b, "S\t%s\t%s\t%s\t%s\n", n, st, orDash(join(self)), orDash(join(part)))
	}
	for _, c := range cmds {
		cmd := r.commands[c.Name]
		if cmd == nil || cmd.alias != "" {
			fmt.Fprintf(&b, "C\t%d\t%s\t?\n", c.ID, c.Name)
			continue
		}
		refs := lenRefs(cmd.params)
		var ops []string
		for _, p := range cmd.params {
			ops = append(ops, r.param(p, refs))
		}
		fmt.Fprintf(&b, "C\t%d\t%s\t%s\n", c.ID, c.Name, orDash(join(ops)))
	}
	return b.Bytes(), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
