package jsonedit

import (
	"errors"
	"strings"
	"testing"
)

// edit is one edit of a test: Set (value and path), Append, or Delete
// (no value).
type edit struct {
	op    string
	value string
	path  []any
}

func (e edit) apply(d *Doc) error {
	switch e.op {
	case "set":
		return d.Set([]byte(e.value), e.path...)
	case "append":
		return d.Append([]byte(e.value), e.path...)
	}
	return d.Delete(e.path...)
}

// TestEdits: each edit's exact bytes, laid out as the document is; an
// insertion's undo (undo, when given) gives back the bytes there were.
func TestEdits(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		edit     edit
		want     string
		undo     []any // the path that deletes what the edit inserted
		undoFrom string
	}{
		{"two spaces, at the end", "{\n  \"a\": 1\n}\n", edit{"set", `{"x": [1, 2]}`, []any{"b"}},
			"{\n  \"a\": 1,\n  \"b\": {\n    \"x\": [\n      1,\n      2\n    ]\n  }\n}\n", []any{"b"}, ""},
		{"four spaces, nested", "{\n    \"mcpServers\": {\n        \"gh\": {\"command\": \"x\"}\n    },\n    \"z\": true\n}",
			edit{"set", `{"type":"stdio","args":[]}`, []any{"mcpServers", "claudemesh"}},
			"{\n    \"mcpServers\": {\n        \"gh\": {\"command\": \"x\"},\n        \"claudemesh\": {\n            \"type\": \"stdio\",\n            \"args\": []\n        }\n    },\n    \"z\": true\n}",
			[]any{"mcpServers", "claudemesh"}, ""},
		{"tabs", "{\n\t\"a\": [\n\t\t1\n\t]\n}", edit{"append", `{"k":"v"}`, []any{"a"}},
			"{\n\t\"a\": [\n\t\t1,\n\t\t{\n\t\t\t\"k\": \"v\"\n\t\t}\n\t]\n}", []any{"a", 1}, ""},
		{"one line, spaced", `{"a": 1, "b": 2}`, edit{"set", `{"c": 3}`, []any{"d"}}, `{"a": 1, "b": 2, "d": {"c":3}}`, []any{"d"}, ""},
		{"one line, compact", `{"a":1}`, edit{"set", `"x"`, []any{"b"}}, `{"a":1,"b":"x"}`, []any{"b"}, ""},
		{"empty root", "{}\n", edit{"set", `[1]`, []any{"hooks"}}, "{\n  \"hooks\": [\n    1\n  ]\n}\n", []any{"hooks"}, ""},
		{"empty object in a laid-out document", "{\n  \"hooks\": {},\n  \"z\": 1\n}", edit{"set", `[]`, []any{"hooks", "Stop"}},
			"{\n  \"hooks\": {\n    \"Stop\": []\n  },\n  \"z\": 1\n}", []any{"hooks", "Stop"}, ""},
		{"empty array on one line", `{"a": []}`, edit{"append", `{"b":1}`, []any{"a"}}, `{"a": [{"b":1}]}`, []any{"a", 0}, ""},
		{"spaced colon kept", "{\n  \"a\" : 1\n}", edit{"set", `2`, []any{"b"}}, "{\n  \"a\" : 1,\n  \"b\" : 2\n}", []any{"b"}, ""},
		{"CRLF", "{\r\n  \"a\": 1\r\n}\r\n", edit{"set", `{"b":2}`, []any{"c"}}, "{\r\n  \"a\": 1,\r\n  \"c\": {\r\n    \"b\": 2\r\n  }\r\n}\r\n",
			[]any{"c"}, ""},
		{"key as written, HTML characters and all", `{}`, edit{"set", `1`, []any{"<&>"}}, "{\n  \"<&>\": 1\n}", []any{"<&>"}, ""},
		{"replace in place", "{\n  \"a\": {\"old\": true},\n  \"b\": 2\n}", edit{"set", `{"new":1}`, []any{"a"}},
			"{\n  \"a\": {\n    \"new\": 1\n  },\n  \"b\": 2\n}", nil, ""},
		{"replace an element", `[1, 2, 3]`, edit{"set", `"two"`, []any{1}}, `[1, "two", 3]`, nil, ""},
		{"replace the root", "[1]\n", edit{"set", `{"a":1}`, nil}, "{\"a\":1}\n", nil, ""},
		{"escaped key found by its text", `{"a\u0062": 1}`, edit{"set", `2`, []any{"ab"}}, `{"a\u0062": 2}`, nil, ""},
		{"delete the middle", "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}", edit{"delete", "", []any{"b"}}, "{\n  \"a\": 1,\n  \"c\": 3\n}", nil, ""},
		{"delete the first", "[\n  1,\n  2\n]", edit{"delete", "", []any{0}}, "[\n  2\n]", nil, ""},
		{"delete the last", "{\n  \"a\": 1,\n  \"b\": 2\n}", edit{"delete", "", []any{"b"}}, "{\n  \"a\": 1\n}", nil, ""},
		{"delete the only one", "{\n  \"x\": {\n    \"a\": 1\n  }\n}", edit{"delete", "", []any{"x", "a"}}, "{\n  \"x\": {}\n}", nil, ""},
		{"delete a twice-named key", `{"a":1,"b":0,"a":2}`, edit{"delete", "", []any{"a"}}, `{"b":0}`, nil, ""},
		{"set a twice-named key: the last", `{"a":1,"a":2}`, edit{"set", `3`, []any{"a"}}, `{"a":1,"a":3}`, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.edit.apply(d); err != nil {
				t.Fatal(err)
			}
			if got := string(d.Bytes()); got != c.want {
				t.Fatalf("got\n%q\nwant\n%q", got, c.want)
			}
			if c.undo == nil {
				return
			}
			if err := d.Delete(c.undo...); err != nil {
				t.Fatal(err)
			}
			if got := string(d.Bytes()); got != c.in {
				t.Fatalf("undone:\n%q\nwant the original\n%q", got, c.in)
			}
		})
	}
}

func TestGet(t *testing.T) {
	d, err := Parse([]byte(`{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}, "n": null, "a": 1, "a": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path []any
		kind Kind
		raw  string
	}{
		{[]any{"hooks", "Stop", 0, "hooks", 0, "type"}, String, `"command"`},
		{[]any{"n"}, Null, "null"},
		{[]any{"a"}, Number, "2"},
		{[]any{"hooks", "Stop"}, Array, `[{"hooks": [{"type": "command"}]}]`},
	} {
		v := d.Get(c.path...)
		if v == nil || v.Kind != c.kind || string(v.Raw) != c.raw {
			t.Errorf("Get(%v) = %+v, want %v %s", c.path, v, c.kind, c.raw)
		}
	}
	for _, path := range [][]any{{"nope"}, {"hooks", 0}, {"hooks", "Stop", 1}, {"hooks", "Stop", -1}, {"n", "x"}, {1.5}} {
		if v := d.Get(path...); v != nil {
			t.Errorf("Get(%v) = %s, want nothing", path, v.Raw)
		}
	}
	if keys := d.Root().Members; len(keys) != 4 || keys[0].Key != "hooks" || keys[3].Key != "a" {
		t.Errorf("members %+v", keys)
	}
}

func TestRefusals(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `{"a":1,}`, "\ufeff{}", `[1, 2`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	const doc = `{"a": {"b": 1}, "l": [1]}`
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []edit{
		{"set", `1`, []any{"x", "y"}},      // no x
		{"set", `1`, []any{"a", "b", "c"}}, // b is a number
		{"set", `1`, []any{"l", 1}},        // past the end: Append adds
		{"set", `1`, []any{"l", "k"}},      // a key of an array
		{"append", `1`, []any{"a"}},        // an object
		{"delete", "", []any{"a", "zz"}},
		{"delete", "", []any{"l", 3}},
		{"delete", "", nil},
	} {
		if err := e.apply(d); err == nil || e.path != nil && !errors.Is(err, ErrNotFound) {
			t.Errorf("%s %v: %v, want ErrNotFound", e.op, e.path, err)
		}
	}
	for _, v := range []string{``, `{`, `1 2`, `nul`} {
		if err := d.Set([]byte(v), "a"); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("Set(%q): %v", v, err)
		}
	}
	if string(d.Bytes()) != doc {
		t.Errorf("refused edits changed the document to %s", d.Bytes())
	}
}
