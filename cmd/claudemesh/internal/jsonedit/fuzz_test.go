package jsonedit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzEdit: whatever the document, Parse accepts exactly what json.Valid
// does and changes no byte; in each of its first containers, adding a
// member (or an element) and deleting it again are the edits a JSON
// decoder sees, nothing else moves, and the deletion gives back the
// original bytes (an empty container's inner white space aside);
// deleting an entry that was there removes just it. The seeds are in
// testdata/fuzz/FuzzEdit.
func FuzzEdit(f *testing.F) {
	f.Add([]byte("{\n  \"a\": 1\n}\n"), "b", []byte(`{"x":[1,2]}`))
	f.Add([]byte(`{"hooks": {"Stop": [{"hooks": []}]}, "z": null}`), "Stop", []byte(`[{"type":"command"}]`))
	f.Add([]byte("[\r\n\t1,\r\n\t{ }\r\n]"), "k", []byte(`"v"`))
	f.Fuzz(func(t *testing.T, doc []byte, key string, value []byte) {
		d, err := Parse(doc)
		if (err == nil) != json.Valid(doc) {
			t.Fatalf("Parse(%q): %v, json.Valid %v", doc, err, json.Valid(doc))
		}
		if err != nil {
			return
		}
		if !bytes.Equal(d.Bytes(), doc) {
			t.Fatalf("Parse changed %q to %q", doc, d.Bytes())
		}
		if !utf8.ValidString(key) {
			return // written as U+FFFD: another key than asked
		}
		for _, path := range containers(d.Root(), nil, 6) {
			checkInsert(t, doc, path, key, value)
			checkDelete(t, doc, path)
		}
	})
}

// containers lists the paths of v's objects and arrays, v's first, at
// most n.
func containers(v *Value, path []any, n int) [][]any {
	if v.Kind != Object && v.Kind != Array {
		return nil
	}
	out := [][]any{slices.Clone(path)}
	for i := 0; i < entries(v) && len(out) < n; i++ {
		step := any(i)
		if v.Kind == Object {
			step = v.Members[i].Key
		}
		out = append(out, containers(v.entryValue(i), append(path, step), n-len(out))...)
	}
	return out[:min(len(out), n)]
}

// checkInsert adds key (or an element) with value to the container at
// path of doc, then deletes it.
func checkInsert(t *testing.T, doc []byte, path []any, key string, value []byte) {
	d, _ := Parse(doc)
	c := d.Get(path...)
	step, add := any(key), func() error { return d.Set(value, append(slices.Clone(path), key)...) }
	if c.Kind == Array {
		step, add = entries(c), func() error { return d.Append(value, path...) }
	} else if c.member(key) >= 0 {
		return // a replacement: checkDelete and TestEdits
	}
	bare := c.Kind == Array && len(c.Raw) == 2 || c.Kind == Object && len(c.Raw) == 2 // no white space inside
	at := append(slices.Clone(path), step)
	if err := add(); err != nil {
		if json.Valid(value) {
			t.Fatalf("adding %s = %q to %q: %v", pathText(at), value, doc, err)
		}
		if !bytes.Equal(d.Bytes(), doc) {
			t.Fatalf("a refused edit changed %q to %q", doc, d.Bytes())
		}
		return
	}
	if !json.Valid(value) {
		t.Fatalf("added %q, not JSON, at %s of %q", value, pathText(at), doc)
	}
	want := decode(t, doc)
	want = edited(want, path, step, decode(t, value), false)
	if got := decode(t, d.Bytes()); !reflect.DeepEqual(got, want) {
		t.Fatalf("adding %s = %q to %q gave %q", pathText(at), value, doc, d.Bytes())
	}
	if err := d.Delete(at...); err != nil {
		t.Fatalf("deleting %s again from %q: %v", pathText(at), d.Bytes(), err)
	}
	if got := d.Bytes(); !bytes.Equal(got, doc) && (entries(c) > 0 || bare) {
		t.Fatalf("adding and deleting %s: %q, want the original %q", pathText(at), got, doc)
	}
	if got := decode(t, d.Bytes()); !reflect.DeepEqual(got, decode(t, doc)) {
		t.Fatalf("adding and deleting %s: %q, not the original %q", pathText(at), d.Bytes(), doc)
	}
}

// checkDelete deletes the first entry of the container at path of doc.
func checkDelete(t *testing.T, doc []byte, path []any) {
	d, _ := Parse(doc)
	c := d.Get(path...)
	if entries(c) == 0 {
		return
	}
	step := any(0)
	if c.Kind == Object {
		step = c.Members[0].Key
	}
	at := append(slices.Clone(path), step)
	if err := d.Delete(at...); err != nil {
		t.Fatalf("deleting %s from %q: %v", pathText(at), doc, err)
	}
	want := edited(decode(t, doc), path, step, nil, true)
	if got := decode(t, d.Bytes()); !reflect.DeepEqual(got, want) {
		t.Fatalf("deleting %s from %q gave %q", pathText(at), doc, d.Bytes())
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// edited is v with the entry step of the container at path set to value
// (an index past the end: appended), or removed (del).
func edited(v any, path []any, step any, value any, del bool) any {
	if len(path) > 0 {
		switch c := v.(type) {
		case map[string]any:
			c[path[0].(string)] = edited(c[path[0].(string)], path[1:], step, value, del)
		case []any:
			c[path[0].(int)] = edited(c[path[0].(int)], path[1:], step, value, del)
		}
		return v
	}
	switch c := v.(type) {
	case map[string]any:
		if del {
			delete(c, step.(string))
		} else {
			c[step.(string)] = value
		}
		return c
	case []any:
		i := step.(int)
		if del {
			return slices.Delete(c, i, i+1)
		}
		return append(c, value)
	}
	return v
}
