package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a tool whose arguments decode into In and whose
// structured result is Out, as mcp.AddTool does — the same tools/list
// entry, the arguments validated against the input schema, a handler's
// error as an error result (a *jsonrpc.Error as the protocol's), Out
// marshalled into structuredContent and, when the handler gave no
// content, into a text block too (TestAddTool holds the two to the same
// answers) — at half its cost a call. Where it differs, on purpose: its
// schemas name one type where the SDK's say ["null", T] (plainTypes), a
// null argument counts as absent, a refused argument is named in a
// sentence (argumentProblem) rather than in the validator's words, an
// error quotes an argument back at most echoLimit characters long, and a
// nil slice in the result is an empty array. mcp.AddTool decodes
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
	in, err := plainTypes(tt.InputSchema.(*jsonschema.Schema)).Resolve(nil)
	if err != nil {
		panic(fmt.Errorf("tool %s: input schema: %w", t.Name, err)) // the schemas are fixed: a failure is a bug
	}
	rt := reflect.TypeFor[Out]()
	var empty any // Out's zero value when Out is a pointer: {} rather than null
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
		empty = reflect.Zero(rt).Interface()
	}
	out, err := jsonschema.ForType(rt, nil)
	if err != nil {
		panic(fmt.Errorf("tool %s: output schema: %w", t.Name, err))
	}
	tt.OutputSchema = plainTypes(out)
	srv.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := decodeArguments[In](req.Params.Arguments, in)
		if err != nil {
			return errorResult(err), nil
		}
		res, result, err := h(ctx, req, args)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return errorResult(errors.New(clipEchoes(err.Error(), req.Params.Arguments))), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		var v any = result
		if empty != nil && reflect.ValueOf(result).IsNil() {
			v = empty
		}
		structured, err := marshalResult(v, out)
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

// decodeArguments validates a tool call's arguments (absent: {}; an
// argument given as null: absent, dropNulls) against the tool's resolved
// input schema and decodes them into In. A refusal says what is wrong in
// a sentence: "invalid arguments: limit must be at most 100, got 1000; …".
func decodeArguments[In any](raw json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return in, invalidArguments("the arguments are not JSON")
	}
	if args, ok := v.(map[string]any); ok {
		dropNulls(args, schema.Schema())
	}
	if err := schema.Validate(v); err != nil {
		if problem := argumentProblem(schema.Schema(), v); problem != "" {
			return in, invalidArguments(problem)
		}
		return in, invalidArguments(clip(err.Error()))
	}
	// The schema has refused what In would take other than as sent: unknown
	// or differently cased names, wrong types.
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, invalidArguments(clip(err.Error()))
	}
	return in, nil
}

// invalidArguments is the error of arguments the tool refused before
// doing anything.
func invalidArguments(problem string) error {
	return fmt.Errorf("invalid arguments: %s; nothing was done: fix it and call the tool again", problem)
}

// marshalResult is a tool's structured result v as JSON, an array where
// the result's schema has one and v has a nil slice (fillNulls).
func marshalResult(v any, schema *jsonschema.Schema) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || !bytes.Contains(b, []byte("null")) {
		return b, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(fillNulls(generic, schema))
}

// clipEchoes is an error's text with every argument text over echoLimit
// that it quotes whole clipped (quoteArg), whoever wrote the sentence.
func clipEchoes(text string, raw json.RawMessage) string {
	if len(text) <= echoLimit {
		return text
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return text
	}
	for _, s := range longTexts(v, nil) {
		text = strings.ReplaceAll(text, strconv.Quote(s), quoteArg(s))
		text = strings.ReplaceAll(text, s, clip(s))
	}
	return text
}

// longTexts appends to texts the strings in v longer than echoLimit.
func longTexts(v any, texts []string) []string {
	switch x := v.(type) {
	case string:
		if len(x) > echoLimit {
			texts = append(texts, x)
		}
	case []any:
		for _, item := range x {
			texts = longTexts(item, texts)
		}
	case map[string]any:
		for _, item := range x {
			texts = longTexts(item, texts)
		}
	}
	return texts
}

// errorResult is a tool's error as its result (the MCP way: the agent
// reads it), not a protocol error.
func errorResult(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}
