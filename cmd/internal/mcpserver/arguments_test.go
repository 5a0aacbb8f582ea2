package mcpserver

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestArgumentSentences: arguments a tool's schema refuses are named in a
// sentence with the bound they broke, quoted back at most echoLimit
// characters long; nothing reaches the daemon.
func TestArgumentSentences(t *testing.T) {
	m := newMCPServer(&sessionLink{}, "test", ToolsClaudemesh, slog.New(slog.DiscardHandler))
	long := strings.Repeat("x", 40_000)
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{"check_messages", map[string]any{"limit": 1000}, "limit must be at most 100, got 1000"},
		{"check_messages", map[string]any{"limit": 0}, "limit must be at least 1, got 0"},
		{"check_messages", map[string]any{"limit": "ten"}, `limit must be an integer, got the text "ten"`},
		{"send_message", map[string]any{"to": "bob", "message": long}, "message must be at most 32768 characters long, got 40000"},
		{"send_message", map[string]any{"to": "bob", "message": "hi", "priority": "urgent"}, `priority must be one of now, next, low, got the text "urgent"`},
		{"send_message", map[string]any{"to": "bob", "message": "hi", "client_message_id": "has space"}, "client_message_id must match the pattern"},
		{"send_message", map[string]any{"to": "bob"}, "message is required"},
		{"send_message", map[string]any{"to": nil, "message": "hi"}, "to is required"},
		{"send_message", map[string]any{"to": "bob", "message": "hi", long: 1}, `this tool has no argument "xxx`},
		{"state_set", map[string]any{"key": "", "value": 1}, "key must not be empty"},
		{"reserve_files", map[string]any{"patterns": []any{}}, "patterns must have at least 1 item, got 0"},
		{"reserve_files", map[string]any{"patterns": []any{"src/**", ""}}, "patterns[1] must not be empty"},
		{"topic_join", map[string]any{"topic": "x", "role": "boss"}, "role must be one of lead, member, observer"},
	} {
		raw, _ := json.Marshal(c.args)
		res, err := m.tools.handlers[c.tool](t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: c.tool, Arguments: raw}})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		got := resultText(res)
		if !res.IsError || !strings.HasPrefix(got, "invalid arguments: "+c.want) || len(got) > 600 {
			t.Errorf("%s(%.100s): %.300q, want %q", c.tool, raw, got, c.want)
		}
	}
}

// TestClipEchoes: an error that quotes an argument whole quotes at most
// its first echoLimit characters.
func TestClipEchoes(t *testing.T) {
	long := strings.Repeat("é", 1000)
	raw, _ := json.Marshal(map[string]any{"to": long, "tags": []any{long + "!"}})
	for _, text := range []string{
		"no peer matches " + `"` + long + `"` + " on mesh local",
		"no tag " + long + "!, sorry",
	} {
		got := clipEchoes(text, raw)
		if strings.Contains(got, strings.Repeat("é", echoLimit+1)) || !strings.Contains(got, "(1000 characters)") &&
			!strings.Contains(got, "(1001 characters)") {
			t.Errorf("clipEchoes(%.40q…) = %.300q", text, got)
		}
	}
	if got := clipEchoes("short", raw); got != "short" {
		t.Errorf("a short error changed: %q", got)
	}
}

// TestToolsDescribed: every tool of every tool set has its behaviour
// hints, and its input and output schemas name one type per value (no
// ["null", T]), say what every property is, and the result of no call
// carries a null array.
func TestToolsDescribed(t *testing.T) {
	listed := map[string]bool{}
	for _, set := range ToolSetNames() {
		m := newMCPServer(&sessionLink{}, "test", ToolSet(set), slog.New(slog.DiscardHandler))
		cs := connectInMemory(t, m.srv)
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			listed[tool.Name] = true
			if a := tool.Annotations; a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
				t.Errorf("%s %s: annotations %+v, want every hint set (toolAnnotations)", set, tool.Name, a)
			}
			for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
				b, _ := json.Marshal(schema)
				var s jsonschema.Schema
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatalf("%s %s schema: %v", tool.Name, what, err)
				}
				checkSchema(t, set+" "+tool.Name+" "+what, &s)
			}
		}
	}
	for name := range toolAnnotations {
		if !listed[name] {
			t.Errorf("toolAnnotations has %s, which the server does not list", name)
		}
	}
	type out struct {
		List  []string `json:"list"`
		Inner struct {
			More []int `json:"more"`
		} `json:"inner"`
		Kept []string `json:"kept,omitempty"`
	}
	schema, _ := jsonschema.For[out](nil)
	got, err := marshalResult(&out{}, plainTypes(schema))
	if err != nil || string(got) != `{"inner":{"more":[]},"list":[]}` {
		t.Errorf("marshalResult of nil slices: %s, %v", got, err)
	}
}

// checkSchema fails on a schema below s (at path) with several types or
// a property without a description.
func checkSchema(t *testing.T, path string, s *jsonschema.Schema) {
	t.Helper()
	if len(s.Types) > 0 {
		t.Errorf("%s: type %v, want one", path, s.Types)
	}
	for name, p := range s.Properties {
		if len(p.Description) < 5 {
			t.Errorf("%s.%s has no description", path, name)
		}
		checkSchema(t, path+"."+name, p)
	}
	if s.Items != nil {
		checkSchema(t, path+"[]", s.Items)
	}
}
