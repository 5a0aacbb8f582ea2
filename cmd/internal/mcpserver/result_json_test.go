package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzToolResultJSON: a tool's result as appendToolResult writes it is
// byte for byte what the SDK's encoding writes (an Encoder without HTML
// escaping, as resultLine's other path), whatever its texts and
// structured content; a result it does not take is left to the SDK.
func FuzzToolResultJSON(f *testing.F) {
	f.Add("3 messages <b>&</b>\u2028", "second", `{"a":"<x>","n":[1,2]}`, false, 2)
	f.Add("", "", "", true, 1)
	f.Add("bad \xff utf-8 \"quoted\" \\ \t\n", "x", `[]`, false, 0)
	f.Add("x", "y", `null`, false, 3)
	f.Fuzz(func(t *testing.T, text, more, structured string, isError bool, blocks int) {
		res := &mcp.CallToolResult{IsError: isError}
		switch blocks % 4 {
		case 1:
			res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
		case 2:
			res.Content = []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: more}}
		case 3:
			res.Content = []mcp.Content{}
		}
		var v any
		if json.Unmarshal([]byte(structured), &v) == nil {
			compact, _ := json.Marshal(v) // as addTool makes it
			res.StructuredContent = json.RawMessage(compact)
		}
		got, ok := appendToolResult(nil, res)
		if !ok {
			t.Fatalf("%+v: not taken", res)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			t.Fatal(err)
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
			t.Fatalf("appendToolResult:\n%s\nthe SDK's encoding:\n%s", got, w)
		}
	})
}

// TestToolResultJSONLeavesOthers: results with meta, another kind of
// content, or structured content that is not raw JSON go to the SDK's
// encoding.
func TestToolResultJSONLeavesOthers(t *testing.T) {
	for _, res := range []*mcp.CallToolResult{
		{Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}},
		{StructuredContent: map[string]any{"a": 1}},
		{StructuredContent: json.RawMessage(nil)},
	} {
		if _, ok := appendToolResult(nil, res); ok {
			t.Errorf("%+v taken", res)
		}
	}
}
