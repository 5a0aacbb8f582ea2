package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type (
	echoIn struct {
		To       string   `json:"to" jsonschema:"Whom."`
		Count    int      `json:"count,omitempty" jsonschema:"How many."`
		Tags     []string `json:"tags,omitempty" jsonschema:"Tags."`
		Priority string   `json:"priority,omitempty" jsonschema:"now or low."`
	}
	echoOut struct {
		To    string `json:"to" jsonschema:"Whom."`
		Count int    `json:"count" jsonschema:"How many."`
	}
)

// echo answers what it was given; "fail", "wire" and "nil" make it fail
// as a tool, fail as the protocol, or return no structured result.
func echo(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, *echoOut, error) {
	switch in.To {
	case "fail":
		return nil, nil, errors.New("no such peer; nothing was sent")
	case "wire":
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad"}
	case "nil":
		return textResult("nothing"), nil, nil
	case "text":
		return textResult("sent to " + in.To), &echoOut{To: in.To, Count: in.Count}, nil
	}
	return nil, &echoOut{To: in.To, Count: in.Count}, nil
}

// echoTool is echo's tool, with a schema that refuses some values.
func echoTool() *mcp.Tool {
	return &mcp.Tool{Name: "echo", Description: "Echo.", InputSchema: schemaOf[echoIn](func(p map[string]*jsonschema.Schema) {
		p["to"].MinLength = jsonschema.Ptr(1)
		p["priority"].Enum = []any{"now", "low"}
		p["count"].Maximum = jsonschema.Ptr(10.0)
	})}
}

// TestAddTool: addTool answers every call as mcp.AddTool does — the same
// tools/list entry but for one type per schema where the SDK's say
// ["null", T], the same refusals of bad arguments (in a sentence of ours
// instead of the validator's words), the same results and errors — one
// server registering echo each way, called alike.
func TestAddTool(t *testing.T) {
	ours, theirs := mcp.NewServer(&mcp.Implementation{Name: "echo"}, nil), mcp.NewServer(&mcp.Implementation{Name: "echo"}, nil)
	addTool(ours, echoTool(), echo)
	mcp.AddTool(theirs, echoTool(), echo)
	a, b := connectInMemory(t, ours), connectInMemory(t, theirs)

	la, err := a.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nullable := regexp.MustCompile(`\["null","(\w+)"\]`)
	if ja, jb := marshal(t, la.Tools), nullable.ReplaceAllString(marshal(t, lb.Tools), `"$1"`); ja != jb {
		t.Errorf("tools/list:\n ours   %s\n theirs %s", ja, jb)
	}

	for _, args := range []any{
		map[string]any{"to": "bob"},
		map[string]any{"to": "bob", "count": 3, "tags": []string{"a"}, "priority": "now"},
		map[string]any{"to": "text", "count": 2},
		map[string]any{"to": "nil"},
		map[string]any{"to": "fail"},
		nil,
		map[string]any{},
		map[string]any{"to": ""},
		map[string]any{"to": 7},
		map[string]any{"to": "bob", "TO": "eve"},
		map[string]any{"To": "bob"},
		map[string]any{"to": "bob", "extra": true},
		map[string]any{"to": "bob", "priority": "urgent"},
		map[string]any{"to": "bob", "count": 11},
		map[string]any{"to": "bob", "count": 1.5},
		map[string]any{"to": "bob", "tags": "a"},
		json.RawMessage(`{"to":"bob","to":"eve"}`),
		json.RawMessage(`[]`),
		json.RawMessage(`"bob"`),
	} {
		ra, errA := a.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: args})
		rb, errB := b.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: args})
		if (errA == nil) != (errB == nil) {
			t.Errorf("%s: protocol error %v, mcp.AddTool's %v", marshal(t, args), errA, errB)
			continue
		}
		if errA != nil {
			continue
		}
		if ra.IsError != rb.IsError || !ra.IsError && (marshal(t, ra.StructuredContent) != marshal(t, rb.StructuredContent) ||
			normalized(resultText(ra)) != normalized(resultText(rb))) {
			t.Errorf("%s:\n ours   %s\n theirs %s", marshal(t, args), marshal(t, ra), marshal(t, rb))
		}
		// Arguments the SDK refuses, ours refuses in a sentence of its own;
		// the handler's error reads the same.
		switch refused := strings.HasPrefix(resultText(rb), `validating "arguments": `); {
		case refused && (!strings.HasPrefix(resultText(ra), "invalid arguments: ") || strings.Contains(resultText(ra), "validating")):
			t.Errorf("%s: ours says %q, want a sentence naming the argument", marshal(t, args), resultText(ra))
		case !refused && ra.IsError && resultText(ra) != resultText(rb):
			t.Errorf("%s: ours says %q, mcp.AddTool %q", marshal(t, args), resultText(ra), resultText(rb))
		}
	}
	if _, err := a.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"to": "wire"}}); err == nil ||
		!strings.Contains(err.Error(), "bad") {
		t.Errorf("a jsonrpc.Error from the handler: %v, want it as the protocol's error", err)
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalized is s re-encoded if it is JSON (the SDK's text block has an
// object's keys sorted, ours in the struct's order), else s.
func normalized(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzDecodeArguments: whatever an agent sends as a tool's arguments,
// decodeArguments answers with an error or with a value that the schema
// takes: it never panics, and what it decodes, encoded again, validates
// (send_message's schema: lengths, patterns, enums, no unknown names).
func FuzzDecodeArguments(f *testing.F) {
	schema := sendMessageSchema()
	resolved, err := schema.Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"to":"bob","message":"hi","thread_id":"t1","ack_required":true,"importance":"urgent"}`))
	f.Add([]byte(`{"to":"*","message":"x","priority":"now","client_message_id":"c-1","subject":"s"}`))
	f.Add([]byte(`{"to":"bob","message":"hi","TO":"eve"}`))
	f.Add([]byte(`{"to":"bob","message":"hi","to":"eve"}`))
	f.Add([]byte(`{"to":["bob","#builds"],"message":"hi"}`))
	f.Add([]byte(`{"to":[],"message":"hi"}`))
	f.Add([]byte(`{"to":7}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeArguments[sendMessageIn](raw, resolved)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid arguments: ") {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Fatalf("%q decoded to %s, which the schema refuses: %v", raw, b, err)
		}
	})
}
