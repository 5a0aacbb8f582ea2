// Package jsonedit edits a JSON document in place: it sets, appends or
// deletes one value, found by its path, and leaves every other byte of the
// document as it was — the indentation, the key order, the number forms,
// the escapes, the line ends. An inserted value is laid out as its
// neighbours are (one per line at their indentation, or on one line);
// deleting what was inserted gives back the bytes there were before.
//
// It is how `claudemesh install claude-code` and `claudemesh hook install`
// edit Claude Code's settings.json and ~/.claude.json: files people write
// and format by hand, which decoding and encoding again would lay out anew.
//
// A path is a list of steps from the document's root: a string names an
// object's member by its key, an int an array's element by its index. A
// key that stands twice in one object is the last one, as JSON.parse and
// encoding/json read it.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound says a path names no value of the document.
var ErrNotFound = errors.New("no such value")

// Kind is the type of a JSON value.
type Kind uint8

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Object
	Array
)

// Value is one value of a document: its kind, its bytes as written, and,
// for an object, its members, for an array, its elements, in order.
type Value struct {
	Kind Kind
	// Raw is the value as written: a slice of the document, not to be
	// changed.
	Raw      []byte
	Members  []Member // of an object
	Elements []*Value // of an array

	start, end int // Raw's place in the document
}

// Member is one member of an object.
type Member struct {
	Key   string
	Value *Value

	start  int // the key's opening quote
	keyEnd int // past the key's closing quote
}

// Doc is a JSON document being edited. Its values are valid until the
// next edit.
type Doc struct {
	src  []byte
	root *Value
	// The document's layout, which inserted values follow: one level of
	// indentation, what stands between a key and its value, the line end,
	// and whether the document spreads over several lines.
	unit, colon, newline string
	multiline            bool
}

// Parse reads a JSON document (one value, white space around it allowed).
func Parse(src []byte) (*Doc, error) {
	if !json.Valid(src) {
		return nil, errors.New("not valid JSON")
	}
	p := parser{src: src}
	root := p.value()
	d := &Doc{src: src, root: root, newline: "\n", unit: indentUnit(src)}
	if i := bytes.IndexByte(src, '\n'); i > 0 && src[i-1] == '\r' {
		d.newline = "\r\n"
	}
	d.multiline = bytes.IndexByte(root.Raw, '\n') >= 0 || (root.Kind == Object || root.Kind == Array) && entries(root) == 0
	d.colon = string(p.colon)
	if p.colon == nil {
		d.colon = map[bool]string{true: ": ", false: ":"}[d.multiline]
	}
	return d, nil
}

// Bytes is the document as it stands.
func (d *Doc) Bytes() []byte { return d.src }

// Root is the document's top value.
func (d *Doc) Root() *Value { return d.root }

// Get is the value at path, nil when there is none.
func (d *Doc) Get(path ...any) *Value {
	v := d.root
	for _, step := range path {
		switch s := step.(type) {
		case string:
			if v.Kind != Object {
				return nil
			}
			i := v.member(s)
			if i < 0 {
				return nil
			}
			v = v.Members[i].Value
		case int:
			if v.Kind != Array || s < 0 || s >= len(v.Elements) {
				return nil
			}
			v = v.Elements[s]
		default:
			return nil
		}
	}
	return v
}

// member is the index of the last member named key, -1 for none.
func (v *Value) member(key string) int {
	for i := len(v.Members) - 1; i >= 0; i-- {
		if v.Members[i].Key == key {
			return i
		}
	}
	return -1
}

// Set makes the value at path value (JSON): it replaces the value there,
// or, when the last step is a key the object lacks, adds the member at the
// object's end. Every value before the last step must exist.
func (d *Doc) Set(value []byte, path ...any) error {
	compact, err := compactValue(value)
	if err != nil {
		return err
	}
	if len(path) == 0 {
		return d.splice(d.root.start, d.root.end, d.format(compact, "", d.multiline))
	}
	parent, err := d.container(path)
	if err != nil {
		return err
	}
	switch last := path[len(path)-1].(type) {
	case string:
		if parent.Kind != Object {
			return fmt.Errorf("%s is not an object: %w", pathText(path[:len(path)-1]), ErrNotFound)
		}
		if i := parent.member(last); i >= 0 {
			return d.replace(parent, i, compact)
		}
		key := quote(last)
		colon := d.colon
		if n := len(parent.Members); n > 0 {
			m := parent.Members[n-1]
			colon = string(d.src[m.keyEnd:m.Value.start])
		}
		return d.insert(parent, func(indent string, multiline bool) string {
			return key + colon + d.format(compact, indent, multiline)
		})
	case int:
		if parent.Kind != Array || last < 0 || last >= len(parent.Elements) {
			return fmt.Errorf("%s: %w", pathText(path), ErrNotFound)
		}
		return d.replace(parent, last, compact)
	}
	return fmt.Errorf("%s: a step is neither a key nor an index: %w", pathText(path), ErrNotFound)
}

// Append adds value (JSON) at the end of the array at path.
func (d *Doc) Append(value []byte, path ...any) error {
	compact, err := compactValue(value)
	if err != nil {
		return err
	}
	arr := d.Get(path...)
	if arr == nil || arr.Kind != Array {
		return fmt.Errorf("%s is not an array: %w", pathText(path), ErrNotFound)
	}
	return d.insert(arr, func(indent string, multiline bool) string { return d.format(compact, indent, multiline) })
}

// Delete removes the value at path: an object's member (each member of
// that name, should the key stand twice) or an array's element.
func (d *Doc) Delete(path ...any) error {
	if len(path) == 0 {
		return errors.New("the document's root cannot be deleted")
	}
	parent, err := d.container(path)
	if err != nil {
		return err
	}
	switch last := path[len(path)-1].(type) {
	case string:
		i := -1
		if parent.Kind == Object {
			i = parent.member(last)
		}
		if i < 0 {
			return fmt.Errorf("%s: %w", pathText(path), ErrNotFound)
		}
		for ; i >= 0; i = d.Get(path[:len(path)-1]...).member(last) {
			if err := d.remove(d.Get(path[:len(path)-1]...), i); err != nil {
				return err
			}
		}
		return nil
	case int:
		if parent.Kind != Array || last < 0 || last >= len(parent.Elements) {
			return fmt.Errorf("%s: %w", pathText(path), ErrNotFound)
		}
		return d.remove(parent, last)
	}
	return fmt.Errorf("%s: a step is neither a key nor an index: %w", pathText(path), ErrNotFound)
}

// container is the object or array holding the last step of path.
func (d *Doc) container(path []any) (*Value, error) {
	parent := d.Get(path[:len(path)-1]...)
	if parent == nil || parent.Kind != Object && parent.Kind != Array {
		return nil, fmt.Errorf("%s is not an object or an array: %w", pathText(path[:len(path)-1]), ErrNotFound)
	}
	return parent, nil
}

// replace puts value in place of entry i of c, laid out at the entry's
// indentation when c has an entry a line.
func (d *Doc) replace(c *Value, i int, value []byte) error {
	old := c.entryValue(i)
	before := d.src[d.entrySepStart(c, i):c.entryStart(i)]
	multiline := bytes.IndexByte(before, '\n') >= 0
	return d.splice(old.start, old.end, d.format(value, lineIndent(d.src, c.entryStart(i)), multiline))
}

// insert adds an entry (made by entry, given the indentation and whether
// entries stand one a line) at the end of c. After the last entry it
// writes a comma and the white space that stands before that entry; into
// an empty container, the entry on a line of its own one level in from
// the container's line (or, in a document on one line, the entry alone).
func (d *Doc) insert(c *Value, entry func(indent string, multiline bool) string) error {
	n := entries(c)
	if n == 0 {
		if !d.multiline {
			return d.splice(c.start+1, c.end-1, entry("", false))
		}
		outer := lineIndent(d.src, c.start)
		inner := outer + d.unit
		return d.splice(c.start+1, c.end-1, d.newline+inner+entry(inner, true)+d.newline+outer)
	}
	sep := string(d.src[d.entrySepStart(c, n-1):c.entryStart(n-1)])
	multiline := strings.IndexByte(sep, '\n') >= 0
	end := c.entryValue(n - 1).end
	return d.splice(end, end, ","+sep+entry(lineIndent(d.src, c.entryStart(n-1)), multiline))
}

// remove takes entry i out of c with what separates it from its
// neighbours, so that the entries left are laid out as they were: the last
// entry from the end of the one before; another up to the next one's
// start; the only one with every byte between the brackets.
func (d *Doc) remove(c *Value, i int) error {
	n := entries(c)
	switch {
	case n == 1:
		return d.splice(c.start+1, c.end-1, "")
	case i == n-1:
		return d.splice(c.entryValue(i-1).end, c.entryValue(i).end, "")
	}
	return d.splice(c.entryStart(i), c.entryStart(i+1), "")
}

// entrySepStart is where the white space before entry i of c begins: past
// the comma after entry i-1, or past the opening bracket.
func (d *Doc) entrySepStart(c *Value, i int) int {
	if i == 0 {
		return c.start + 1
	}
	return bytes.IndexByte(d.src[c.entryValue(i-1).end:], ',') + c.entryValue(i-1).end + 1
}

// splice replaces src[from:to] with text and reads the document again; an
// edit that would leave it invalid is refused and changes nothing.
func (d *Doc) splice(from, to int, text string) error {
	out := make([]byte, 0, len(d.src)-(to-from)+len(text))
	out = append(append(append(out, d.src[:from]...), text...), d.src[to:]...)
	next, err := Parse(out)
	if err != nil {
		return fmt.Errorf("the edit would leave the document invalid: %w", err)
	}
	*d = *next
	return nil
}

// format lays compact out at indent, one entry a line when multiline.
func (d *Doc) format(compact []byte, indent string, multiline bool) string {
	if !multiline {
		return string(compact)
	}
	var b bytes.Buffer
	_ = json.Indent(&b, compact, indent, d.unit) // compact is valid JSON
	if d.newline != "\n" {
		return strings.ReplaceAll(b.String(), "\n", d.newline)
	}
	return b.String()
}

func entries(c *Value) int {
	if c.Kind == Object {
		return len(c.Members)
	}
	return len(c.Elements)
}

// entryStart is where entry i of c begins: a member's key, an element.
func (c *Value) entryStart(i int) int {
	if c.Kind == Object {
		return c.Members[i].start
	}
	return c.Elements[i].start
}

func (c *Value) entryValue(i int) *Value {
	if c.Kind == Object {
		return c.Members[i].Value
	}
	return c.Elements[i]
}

// compactValue is value without white space between its tokens, or why it
// is not one JSON value.
func compactValue(value []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, value); err != nil || !json.Valid(value) {
		return nil, fmt.Errorf("the value to write is not valid JSON: %q", clip(value))
	}
	return b.Bytes(), nil
}

// quote is key as a JSON string, with <, > and & as they are.
func quote(key string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// lineIndent is the white space that begins the line holding src[pos].
func lineIndent(src []byte, pos int) string {
	start := bytes.LastIndexByte(src[:pos], '\n') + 1
	end := start
	for end < pos && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// indentUnit is one level of the document's indentation: the white space
// that begins its first indented line, two spaces when no line is.
func indentUnit(src []byte) string {
	for i := bytes.IndexByte(src, '\n'); i >= 0; {
		j := i + 1
		for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
			j++
		}
		if j > i+1 && j < len(src) && src[j] != '\n' && src[j] != '\r' {
			return string(src[i+1 : j])
		}
		next := bytes.IndexByte(src[j:], '\n')
		if next < 0 {
			break
		}
		i = j + next
	}
	return "  "
}

// pathText writes a path for a message: mcpServers.claudemesh, hooks.Stop[0].
func pathText(path []any) string {
	if len(path) == 0 {
		return "the document"
	}
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		default:
			fmt.Fprintf(&b, "[%v]", s)
		}
	}
	return b.String()
}

// clip is the start of a value for a message.
func clip(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
