package jsonedit

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// parser reads a document json.Valid has accepted into Values that know
// where they stand; it trusts the input's validity and checks nothing.
type parser struct {
	src   []byte
	pos   int
	colon []byte // what stands between the document's first key and its value
}

func (p *parser) space() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value reads the value at pos (after white space).
func (p *parser) value() *Value {
	p.space()
	v := &Value{start: p.pos}
	switch c := p.src[p.pos]; c {
	case '{':
		v.Kind = Object
		p.object(v)
	case '[':
		v.Kind = Array
		p.array(v)
	case '"':
		v.Kind = String
		p.str()
	case 't':
		v.Kind = Bool
		p.pos += 4
	case 'n':
		v.Kind = Null
		p.pos += 4
	case 'f':
		v.Kind = Bool
		p.pos += 5
	default:
		v.Kind = Number
		for p.pos < len(p.src) && bytes.IndexByte([]byte("+-0123456789.eE"), p.src[p.pos]) >= 0 {
			p.pos++
		}
	}
	v.end = p.pos
	v.Raw = p.src[v.start:v.end:v.end]
	return v
}

func (p *parser) object(v *Value) {
	p.pos++ // {
	p.space()
	if p.src[p.pos] == '}' {
		p.pos++
		return
	}
	for {
		p.space()
		m := Member{start: p.pos}
		m.Key = p.str()
		m.keyEnd = p.pos
		p.space()
		p.pos++ // :
		m.Value = p.value()
		if p.colon == nil {
			p.colon = p.src[m.keyEnd:m.Value.start]
		}
		v.Members = append(v.Members, m)
		p.space()
		p.pos++ // , or }
		if p.src[p.pos-1] == '}' {
			return
		}
	}
}

func (p *parser) array(v *Value) {
	p.pos++ // [
	p.space()
	if p.src[p.pos] == ']' {
		p.pos++
		return
	}
	for {
		v.Elements = append(v.Elements, p.value())
		p.space()
		p.pos++ // , or ]
		if p.src[p.pos-1] == ']' {
			return
		}
	}
}

// str reads a string at pos and returns its text, as a JSON decoder reads
// it.
func (p *parser) str() string {
	start := p.pos
	p.pos++ // "
	escaped := false
	for p.src[p.pos] != '"' {
		if p.src[p.pos] == '\\' {
			escaped = true
			p.pos++
		}
		p.pos++
	}
	p.pos++
	raw := p.src[start:p.pos]
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON; invalid UTF-8 reads as U+FFFD, as JSON.parse has it
	return s
}
