package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a tool whose arguments decode into In and whose
// structured result is Out, as mcp.AddTool does — the same tools/list
// entry, the arguments validated against the input schema with the SDK's
// error text, a handler's error as an error result (a *jsonrpc.Error as
// the protocol's), Out marshalled into structuredContent and, when the
// handler gave no content, into a text block too (TestAddTool holds the
// two to the same answers) — at half its cost a call. mcp.AddTool decodes
// the arguments twice with a fresh 32 KiB buffer apiece (a map to
// validate, then In) and validates the result against the schema inferred
// from the very type it marshalled; here they are decoded twice with
// encoding/json (a generic value to validate, then In), and the result is
// not validated: every Out is a struct of plain fields (`any` where a
// value is any JSON), so it conforms to its own schema by construction.
// Our input schemas declare no defaults, so none is applied. The SDK's
// wrapper was a fifth of claudemesh-mcp's CPU while agents sent mail at
// full speed (BenchmarkMCPMailSend, 16 clients), ours a tenth.
func addTool[In, Out any](srv toolAdder, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	tt := *t
	if tt.InputSchema == nil {
		tt.InputSchema = schemaOf[In](nil)
	}
	in, err := tt.InputSchema.(*jsonschema.Schema).Resolve(nil)
	if err != nil {
		panic(fmt.Errorf("tool %s: input schema: %w", t.Name, err)) // the schemas are fixed: a failure is a bug
	}
	rt := reflect.TypeFor[Out]()
	var empty any // Out's zero value when Out is a pointer: {} rather than null
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
		empty = reflect.Zero(rt).Interface()
	}
	if tt.OutputSchema, err = jsonschema.ForType(rt, nil); err != nil {
		panic(fmt.Errorf("tool %s: output schema: %w", t.Name, err))
	}
	srv.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := decodeArguments[In](req.Params.Arguments, in)
		if err != nil {
			return errorResult(err), nil
		}
		res, out, err := h(ctx, req, args)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return errorResult(err), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		var v any = out
		if empty != nil && reflect.ValueOf(out).IsNil() {
			v = empty
		}
		structured, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("tool %s: marshalling its result: %w", t.Name, err)
		}
		res.StructuredContent = json.RawMessage(structured)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(structured)}}
		}
		return res, nil
	})
}

// toolAdder is where addTool registers a tool: an *mcp.Server, or the
// MCP server's toolSet, which keeps the handler for directCalls too.
type toolAdder interface {
	AddTool(t *mcp.Tool, h mcp.ToolHandler)
}

// decodeArguments validates a tool call's arguments (absent: {}) against
// the tool's resolved input schema and decodes them into In.
func decodeArguments[In any](raw json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return in, fmt.Errorf("validating \"arguments\": unmarshaling arguments: %w", err)
	}
	if err := schema.Validate(v); err != nil {
		return in, fmt.Errorf("validating \"arguments\": %w", err)
	}
	// The schema has refused what In would take other than as sent: unknown
	// or differently cased names, wrong types.
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, fmt.Errorf("validating \"arguments\": %w", err)
	}
	return in, nil
}

// errorResult is a tool's error as its result (the MCP way: the agent
// reads it), not a protocol error.
func errorResult(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}
