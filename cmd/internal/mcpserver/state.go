package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The state tools: the mesh's shared state through the daemon, as the
// session.
type (
	stateGetIn struct {
		Key string `json:"key" jsonschema:"The key, as state_list shows it."`
	}
	stateSetIn struct {
		Key   string `json:"key" jsonschema:"The key: 1-256 characters, no control characters."`
		Value any    `json:"value" jsonschema:"The value: any JSON (string, number, boolean, null, object, array), at most 64 KiB."`
		// IfVersion is a pointer: 0 is a real answer (the key must not exist).
		IfVersion *int64 `json:"if_version,omitempty" jsonschema:"Compare-and-set: set only if the key is at this version (0: only if it does not exist yet). Omit to set whatever the version."`
	}
	stateListIn struct{}
	stateOut    struct {
		Key       string `json:"key" jsonschema:"The key."`
		Value     any    `json:"value" jsonschema:"Its JSON value."`
		Version   int64  `json:"version" jsonschema:"Its version: 1 when first set, one more per set; if_version takes it."`
		UpdatedBy string `json:"updated_by" jsonschema:"Who set it last (display name)."`
		UpdatedAt string `json:"updated_at" jsonschema:"When it was set last."`
	}
	stateSetOut struct {
		Key     string `json:"key" jsonschema:"The key."`
		Version int64  `json:"version" jsonschema:"Its new version (0: the broker does not report versions)."`
	}
	stateListOut struct {
		Entries []stateOut `json:"entries" jsonschema:"Every key of the mesh's state, by key."`
	}
)

func (m *mcpServer) addStateTools() {
	key := func(p map[string]*jsonschema.Schema) {
		p["key"].MinLength, p["key"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxStateKey)
	}
	addTool(m.tools, &mcp.Tool{Name: "state_get", Title: "Read shared state",
		Description: "Read one key of the mesh's shared state (small JSON values every agent of the mesh can read and set, " +
			"such as who owns the release branch): its value, version, and who set it when.",
		InputSchema: schemaOf[stateGetIn](key)}, m.stateGet)
	addTool(m.tools, &mcp.Tool{Name: "state_set", Title: "Set shared state",
		Description: "Set a key of the mesh's shared state to a JSON value; every other agent of the mesh is told. " +
			"To change a value without losing someone else's update, read it with state_get and pass its version as if_version: " +
			"if the key moved on meanwhile, nothing is set and you get the current version and value to retry with.",
		InputSchema: schemaOf[stateSetIn](func(p map[string]*jsonschema.Schema) {
			key(p)
			p["if_version"].Minimum = jsonschema.Ptr(0.0)
		})}, m.stateSet)
	addTool(m.tools, &mcp.Tool{Name: "state_list", Title: "List shared state",
		Description: "List every key of the mesh's shared state with its value and version.",
		InputSchema: schemaOf[stateListIn](nil)}, m.stateList)
}

// stateError is the sentence for a failed state request.
func (m *mcpServer) stateError(s *Session, key string, err error) error {
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeStateNotFound:
		return fmt.Errorf("the mesh's state has no key %s; call state_list to see the keys, or state_set to make it", quoteArg(key))
	case errors.As(err, &me) && me.Code == messages.CodeStateConflict && me.State != nil:
		return fmt.Errorf("nothing was set: key %s is at version %d now (value %s); read it, then call state_set again with if_version %d",
			quoteArg(key), me.State.Version, clip(string(me.State.Value)), me.State.Version)
	case errors.As(err, &me) && me.Status == 400 || errors.As(err, &me) && me.Status == 413:
		return fmt.Errorf("invalid argument: %s; nothing was set: fix it and call again", agentDetail(s, me.Detail))
	}
	return m.toolError(s, err)
}

func stateOf(e messages.StateInfo) stateOut {
	var v any
	_ = json.Unmarshal(e.Value, &v) // the broker sends valid JSON; null otherwise
	return stateOut{Key: e.Key, Value: v, Version: e.Version, UpdatedBy: e.UpdatedBy, UpdatedAt: e.UpdatedAt}
}

func (m *mcpServer) stateGet(ctx context.Context, _ *mcp.CallToolRequest, in stateGetIn) (*mcp.CallToolResult, *stateOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.StateGot, error) { return s.as().State(ctx, "", in.Key) })
	if err != nil {
		return nil, nil, m.stateError(s, in.Key, err)
	}
	out := stateOf(res.State.StateInfo)
	return textResult(fmt.Sprintf("%s = %s (version %d, set by %s at %s).", out.Key, res.State.Value, out.Version, out.UpdatedBy,
		out.UpdatedAt)), &out, nil
}

func (m *mcpServer) stateSet(ctx context.Context, _ *mcp.CallToolRequest, in stateSetIn) (*mcp.CallToolResult, *stateSetOut, error) {
	value, err := json.Marshal(in.Value)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid argument: value is not JSON (%v); nothing was set", err)
	}
	req := &messages.StateSetRequest{Key: in.Key, Value: value, IfVersion: in.IfVersion}
	if err := req.Validate(); err != nil {
		return nil, nil, m.stateError(nil, in.Key, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().SetState(ctx, req)
	if err != nil {
		return nil, nil, m.stateError(s, in.Key, err)
	}
	return textResult(fmt.Sprintf("Set %s: version %d.", res.Key, res.Version)), &stateSetOut{Key: res.Key, Version: res.Version}, nil
}

func (m *mcpServer) stateList(ctx context.Context, _ *mcp.CallToolRequest, _ stateListIn) (*mcp.CallToolResult, *stateListOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.StateList, error) { return s.as().StateList(ctx, "") })
	if err != nil {
		return nil, nil, m.stateError(s, "", err)
	}
	out := &stateListOut{Entries: make([]stateOut, len(res.Entries))}
	if len(res.Entries) == 0 {
		return textResult("The mesh's state is empty; state_set sets a key."), out, nil
	}
	var text strings.Builder
	fmt.Fprintf(&text, "%s:", count(len(res.Entries), "key", "keys"))
	for i, e := range res.Entries {
		out.Entries[i] = stateOf(e)
		fmt.Fprintf(&text, "\n%s = %s (version %d, set by %s)", e.Key, e.Value, e.Version, e.UpdatedBy)
	}
	return textResult(text.String()), out, nil
}
