package messages

import "unicode/utf8"

// AppendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes it: json.Marshal with escapeHTML, an Encoder with
// SetEscapeHTML(false) without (FuzzAppendJSONString).
func AppendJSONString(b []byte, s string, escapeHTML bool) []byte {
	safe := &jsonSafe[0]
	if escapeHTML {
		safe = &jsonSafe[1]
	}
	b = append(b, '"')
	start := 0 // s[start:i] needs no escape: appended in one piece
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default: // another control character, or <, >, & escaped for HTML
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// NullString is a string that JSON renders as null when it is empty: a
// field an upstream client reads as always present, null when absent (an
// inbox item's topic and reply_to_id, spec/upstream-daemon-notes.md §3.4).
// It decodes from a string or from null.
type NullString string

// String is s as a plain string: what a template function taking a
// string is given (`{{show .Topic.String}}`).
func (s NullString) String() string { return string(s) }

// MarshalJSON renders s, null when it is empty, without escaping HTML:
// the encoder escapes it, or not, as it does in a string field.
func (s NullString) MarshalJSON() ([]byte, error) { return s.append(nil, false), nil }

// append appends s as JSON, escaping HTML as json.Marshal does when
// escapeHTML is set.
func (s NullString) append(b []byte, escapeHTML bool) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendJSONString(b, string(s), escapeHTML)
}

const hexDigits = "0123456789abcdef"

// jsonSafe tells the ASCII bytes a JSON string takes as they are: [0]
// without HTML escaping, [1] with it.
var jsonSafe = func() (t [2][utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		t[0][c] = c != '"' && c != '\\'
		t[1][c] = t[0][c] && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// loneSurrogate finds the first \u escape in JSON text b that is half of a
// UTF-16 surrogate pair without its other half (encoding/json decodes one
// to U+FFFD without a word) and returns the escape and whether there is
// one. b must be JSON: a backslash occurs only inside a string.
func loneSurrogate(b []byte) (string, bool) {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // a two-byte escape: skip the escaped byte (an escaped backslash among them)
			continue
		}
		r, ok := hex4(b[i+2:])
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00:
			return string(b[i : i+6]), true // a low half first
		default: // a high half: a low half must follow at once
			if len(b) < i+12 || b[i+6] != '\\' || b[i+7] != 'u' {
				return string(b[i : i+6]), true
			}
			if lo, ok := hex4(b[i+8:]); !ok || lo < 0xdc00 || lo > 0xdfff {
				return string(b[i : i+6]), true
			}
			i += 6
		}
		i += 5
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
