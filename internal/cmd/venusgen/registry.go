package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// member is a struct member or a command parameter, as vk.xml spells it.
type member struct {
	name     string
	typ      string
	ptrs     int  // '*' between the type and the name
	isConst  bool // "const" before the type
	array    bool // a fixed-size array ("[4]", "[VK_UUID_SIZE]")
	bitfield bool // ":8"
	length   string
	values   string // sType's value
}

type structDef struct {
	name    string
	union   bool
	members []member
	sType   string
	alias   string
}

type command struct {
	name   string
	params []member
	alias  string
}

// registry is what venusgen reads from vk.xml and the Venus additions.
type registry struct {
	structs  map[string]*structDef
	handles  map[string]bool
	enums    map[string]int // enum and bitmask types: their size in bytes
	basetype map[string]string
	commands map[string]*command
	sTypes   map[string]int64 // VkStructureType names to values
	stAlias  map[string]string
}

func newRegistry() *registry {
	return &registry{structs: map[string]*structDef{}, handles: map[string]bool{}, enums: map[string]int{},
		basetype: map[string]string{}, commands: map[string]*command{}, sTypes: map[string]int64{}, stAlias: map[string]string{}}
}

// node is a generic XML element.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Content []byte     `xml:",chardata"`
	Nodes   []node     `xml:",any"`
	// parts keeps the element's children and text in document order
	parts []part
}

type part struct {
	text string
	elem *node
}

func (n *node) attr(k string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == k {
			return a.Value
		}
	}
	return ""
}

// parse reads an element and its subtree keeping text and children in order.
func parse(d *xml.Decoder, start xml.StartElement) (*node, error) {
	n := &node{XMLName: start.Name, Attrs: start.Attr}
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			c, err := parse(d, t)
			if err != nil {
				return nil, err
			}
			n.Nodes = append(n.Nodes, *c)
			n.parts = append(n.parts, part{elem: c})
		case xml.CharData:
			n.parts = append(n.parts, part{text: string(t)})
		case xml.EndElement:
			return n, nil
		}
	}
}

func (n *node) child(name string) *node {
	for _, p := range n.parts {
		if p.elem != nil && p.elem.XMLName.Local == name {
			return p.elem
		}
	}
	return nil
}

func (n *node) text() string {
	var b strings.Builder
	for _, p := range n.parts {
		if p.elem != nil {
			if p.elem.XMLName.Local != "comment" {
				b.WriteString(p.elem.text())
			}
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

func (r *registry) load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read registry: %w", err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		st, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch st.Name.Local {
		case "types", "commands", "enums", "feature", "extension":
			n, err := parse(d, st)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			r.take(n, 0)
		}
	}
}

func vulkanAPI(n *node) bool {
	api := n.attr("api")
	if api == "" {
		api = n.attr("supported")
	}
	if api == "" {
		return true
	}
	for _, a := range strings.Split(api, ",") {
		if a == "vulkan" {
			return true
		}
	}
	return false
}

func (r *registry) take(n *node, extNumber int64) {
	switch n.XMLName.Local {
	case "types":
		for i := range n.Nodes {
			r.typ(&n.Nodes[i])
		}
	case "commands":
		for i := range n.Nodes {
			r.command(&n.Nodes[i])
		}
	case "enums":
		bits := 4
		if n.attr("bitwidth") == "64" {
			bits = 8
		}
		if name := n.attr("name"); name != "" && name != "API Constants" {
			r.enums[name] = bits
		}
		if n.attr("name") == "VkStructureType" {
			for i := range n.Nodes {
				r.enumValue(&n.Nodes[i], 0)
			}
		}
	case "feature", "extension":
		if n.XMLName.Local == "extension" {
			extNumber, _ = strconv.ParseInt(n.attr("number"), 10, 64)
		}
		for i := range n.Nodes {
			c := &n.Nodes[i]
			if c.XMLName.Local != "require" {
				continue
			}
			for j := range c.Nodes {
				e := &c.Nodes[j]
				if e.XMLName.Local == "enum" && e.attr("extends") == "VkStructureType" {
					r.enumValue(e, extNumber)
				}
			}
		}
	}
}

func (r *registry) enumValue(e *node, extNumber int64) {
	name := e.attr("name")
	if e.XMLName.Local != "enum" || name == "" {
		return
	}
	if a := e.attr("alias"); a != "" {
		r.stAlias[name] = a
		return
	}
	if v := e.attr("value"); v != "" {
		x, err := strconv.ParseInt(v, 0, 64)
		if err == nil {
			r.sTypes[name] = x
		}
		return
	}
	if off := e.attr("offset"); off != "" {
		o, _ := strconv.ParseInt(off, 10, 64)
		num := extNumber
		if en := e.attr("extnumber"); en != "" {
			num, _ = strconv.ParseInt(en, 10, 64)
		}
		v := 1000000000 + (num-1)*1000 + o
		if e.attr("dir") == "-" {
			v = -v
		}
		r.sTypes[name] = v
	}
}

func (r *registry) typ(n *node) {
	if n.XMLName.Local != "type" || !vulkanAPI(n) {
		return
	}
	name := n.attr("name")
	if name == "" {
		if c := n.child("name"); c != nil {
			name = c.text()
		}
	}
	switch n.attr("category") {
	case "struct", "union":
		s := &structDef{name: name, union: n.attr("category") == "union", alias: n.attr("alias")}
		for i := range n.Nodes {
			c := &n.Nodes[i]
			if c.XMLName.Local != "member" || !vulkanAPI(c) {
				continue
			}
			m := readMember(c)
			if m.name == "sType" {
				s.sType = m.values
			}
			s.members = append(s.members, m)
		}
		if _, dup := r.structs[name]; !dup || s.alias == "" {
			r.structs[name] = s
		}
	case "handle":
		r.handles[name] = true
		if a := n.attr("alias"); a != "" {
			r.handles[name] = true
		}
	case "enum":
		if _, ok := r.enums[name]; !ok {
			r.enums[name] = 4
		}
		if a := n.attr("alias"); a != "" {
			r.basetype[name] = a
		}
	case "bitmask":
		if a := n.attr("alias"); a != "" {
			r.basetype[name] = a
			return
		}
		size := 4
		if t := n.child("type"); t != nil && t.text() == "VkFlags64" {
			size = 8
		}
		r.enums[name] = size
	case "basetype":
		if t := n.child("type"); t != nil {
			if strings.Contains(n.text(), "*") {
				r.basetype[name] = "void*"
			} else {
				r.basetype[name] = t.text()
			}
		}
	}
}

var arrayRe = regexp.MustCompile(`\[[^\]]*\]`)

func readMember(c *node) member {
	m := member{length: c.attr("len"), values: c.attr("values")}
	seenType, seenName := false, false
	for _, p := range c.parts {
		switch {
		case p.elem != nil && p.elem.XMLName.Local == "type":
			m.typ = p.elem.text()
			seenType = true
		case p.elem != nil && p.elem.XMLName.Local == "name":
			m.name = p.elem.text()
			seenName = true
		case p.elem != nil && p.elem.XMLName.Local == "enum" && seenName:
			m.array = true
		case p.elem == nil:
			switch {
			case !seenType && strings.Contains(p.text, "const"):
				m.isConst = true
			case seenType && !seenName:
				m.ptrs += strings.Count(p.text, "*")
				if strings.Contains(p.text, "const") {
					m.isConst = true
				}
			case seenName:
				if arrayRe.MatchString(p.text) || strings.Contains(p.text, "[") {
					m.array = true
				}
				if strings.HasPrefix(strings.TrimSpace(p.text), ":") {
					m.bitfield = true
				}
			}
		}
	}
	return m
}

func (r *registry) command(n *node) {
	if n.XMLName.Local != "command" || !vulkanAPI(n) {
		return
	}
	if a := n.attr("alias"); a != "" {
		r.commands[n.attr("name")] = &command{name: n.attr("name"), alias: a}
		return
	}
	proto := n.child("proto")
	if proto == nil {
		return
	}
	c := &command{name: proto.child("name").text()}
	for i := range n.Nodes {
		p := &n.Nodes[i]
		if p.XMLName.Local == "param" && vulkanAPI(p) {
			c.params = append(c.params, readMember(p))
		}
	}
	r.commands[c.name] = c
}

// resolve follows aliases of struct types.
func (r *registry) resolve() {
	for n, s := range r.structs {
		seen := 0
		for s.alias != "" && seen < 8 {
			t := r.structs[s.alias]
			if t == nil {
				break
			}
			s = t
			seen++
		}
		r.structs[n] = s
	}
	for n, c := range r.commands {
		seen := 0
		for c.alias != "" && seen < 8 {
			t := r.commands[c.alias]
			if t == nil {
				break
			}
			c = t
			seen++
		}
		r.commands[n] = c
	}
}

func (r *registry) sTypeValue(name string) (int64, bool) {
	for i := 0; i < 8; i++ {
		if v, ok := r.sTypes[name]; ok {
			return v, true
		}
		a, ok := r.stAlias[name]
		if !ok {
			return 0, false
		}
		name = a
	}
	return 0, false
}
