package mcpserver

import (
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// appendToolResult appends res as the SDK's encoding of a CallToolResult
// writes it, in one pass, for the results the tools make: text blocks
// without meta or annotations, and structured content as the compact JSON
// addTool marshalled (FuzzToolResultJSON holds the two to the same
// bytes). ok is false for any other result, which the caller encodes as
// the SDK does. The SDK's encoding goes over a result several times (each
// level's MarshalJSON output is compacted again by the level above): for
// fetch_inbox's thousand messages, 700 KB, that was 10 ms of its 25.
func appendToolResult(b []byte, res *mcp.CallToolResult) (_ []byte, ok bool) {
	if len(res.Meta) > 0 || len(res.InputRequests) > 0 || res.RequestState != "" {
		return b, false
	}
	raw, isRaw := res.StructuredContent.(json.RawMessage)
	if res.StructuredContent != nil && (!isRaw || len(raw) == 0) {
		return b, false
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); !ok || len(t.Meta) > 0 || t.Annotations != nil {
			return b, false
		}
	}
	size := len(raw) + 64
	for _, c := range res.Content {
		size += len(c.(*mcp.TextContent).Text) + len(c.(*mcp.TextContent).Text)/8 + 32 // room for escapes
	}
	b = append(slices.Grow(b, size), `{"content":`...)
	if res.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, c := range res.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = messages.AppendJSONString(append(b, `{"type":"text","text":`...), c.(*mcp.TextContent).Text, true)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if raw != nil {
		b = append(append(b, `,"structuredContent":`...), raw...)
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, '}'), true
}
