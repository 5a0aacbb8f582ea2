package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The memory tools: the mesh's searchable memory through the daemon, as
// the session.
type (
	rememberIn struct {
		Content string   `json:"content" jsonschema:"What to remember: a fact, a decision, how something was fixed. Any agent of the mesh can recall it."`
		Tags    []string `json:"tags,omitempty" jsonschema:"Tags to recall it by (up to 16), e.g. ci, release."`
	}
	rememberOut struct {
		ID string `json:"id" jsonschema:"The memory's id, for forget."`
	}
	recallIn struct {
		Query string   `json:"query" jsonschema:"Words to search for; the best matches come first, an exact phrase before the rest. Quotes and operators are plain text. Empty: the newest memories."`
		Tags  []string `json:"tags,omitempty" jsonschema:"Only memories with every one of these tags."`
		Limit int      `json:"limit,omitempty" jsonschema:"At most this many memories, 1-100 (default 20)."`
	}
	recallOut struct {
		Memories []memoryOut `json:"memories" jsonschema:"The memories found, best match first."`
	}
	memoryOut struct {
		ID      string   `json:"id" jsonschema:"The memory's id, for forget."`
		Content string   `json:"content" jsonschema:"What was remembered."`
		Tags    []string `json:"tags" jsonschema:"Its tags."`
		By      string   `json:"by" jsonschema:"Who remembered it: a display name, else a pubkey."`
		At      string   `json:"at" jsonschema:"When it was remembered."`
	}
	forgetIn struct {
		ID string `json:"id" jsonschema:"The memory's id, as remember or recall gave it."`
	}
	forgetOut struct {
		ID string `json:"id" jsonschema:"The memory forgotten (or already gone)."`
	}
)

func (m *mcpServer) addMemoryTools() {
	tags := func(p *jsonschema.Schema) {
		p.MaxItems = jsonschema.Ptr(messages.MaxMemoryTags)
		p.Items.MinLength, p.Items.MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxMemoryTagBytes)
	}
	addTool(m.tools, &mcp.Tool{Name: "remember", Title: "Remember",
		Description: "Store something in the mesh's shared memory, with optional tags, so that any agent of the mesh (you later, too) can find it with recall.",
		InputSchema: schemaOf[rememberIn](func(p map[string]*jsonschema.Schema) {
			p["content"].MinLength, p["content"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxMemoryBytes)
			tags(p["tags"])
		})}, m.remember)
	addTool(m.tools, &mcp.Tool{Name: "recall", Title: "Recall",
		Description: "Search the mesh's shared memory: what agents of the mesh remembered, best match first, with who remembered it and when.",
		InputSchema: schemaOf[recallIn](func(p map[string]*jsonschema.Schema) {
			p["query"].MaxLength = jsonschema.Ptr(messages.MaxRecallQueryBytes)
			tags(p["tags"])
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(messages.MaxRecallLimit))
		})}, m.recall)
	addTool(m.tools, &mcp.Tool{Name: "forget", Title: "Forget",
		Description: "Delete a memory of the mesh for good (by its id from remember or recall); forgetting one already gone is no error.",
		InputSchema: schemaOf[forgetIn](func(p map[string]*jsonschema.Schema) {
			p["id"].Pattern = fmt.Sprintf("^[0-9A-Za-z]{%d}$", messages.MemoryIDLength)
		})}, m.forget)
}

// memoryError is the sentence for a failed memory request.
func (m *mcpServer) memoryError(s *Session, err error) error {
	var me *messages.Error
	if errors.As(err, &me) && me.Code == messages.CodeInvalidMemory {
		return fmt.Errorf("invalid argument: %s; nothing was changed: fix it and call again", agentDetail(s, me.Detail))
	}
	return m.toolError(s, err)
}

func (m *mcpServer) remember(ctx context.Context, _ *mcp.CallToolRequest, in rememberIn) (*mcp.CallToolResult, *rememberOut, error) {
	req := &messages.RememberRequest{Content: in.Content, Tags: in.Tags}
	if err := req.Validate(); err != nil {
		return nil, nil, m.memoryError(nil, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().Remember(ctx, req)
	if err != nil {
		return nil, nil, m.memoryError(s, err)
	}
	return textResult(fmt.Sprintf("Remembered (id %s); any agent of the mesh can recall it.", res.ID)), &rememberOut{ID: res.ID}, nil
}

func (m *mcpServer) recall(ctx context.Context, _ *mcp.CallToolRequest, in recallIn) (*mcp.CallToolResult, *recallOut, error) {
	err := messages.ValidateRecall(in.Query, in.Limit)
	if err == nil {
		err = messages.ValidateMemoryTags(in.Tags)
	}
	if err != nil {
		return nil, nil, m.memoryError(nil, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.MemoryMatches, error) {
		return s.as().Recall(ctx, "", in.Query, in.Tags, in.Limit)
	})
	if err != nil {
		return nil, nil, m.memoryError(s, err)
	}
	out := &recallOut{Memories: make([]memoryOut, len(res.Matches))}
	var text strings.Builder
	fmt.Fprintf(&text, "%d %s, best match first:", len(res.Matches), plural(len(res.Matches), "memory", "memories"))
	for i, mm := range res.Matches {
		by := mm.RememberedByName
		if by == "" {
			by = mm.RememberedBy
		}
		out.Memories[i] = memoryOut{ID: mm.ID, Content: mm.Content, Tags: mm.Tags, By: by, At: mm.RememberedAt}
		fmt.Fprintf(&text, "\n[%s] %s (id %s", mm.RememberedAt, by, mm.ID)
		if len(mm.Tags) > 0 {
			fmt.Fprintf(&text, "; tags %s", strings.Join(mm.Tags, ", "))
		}
		fmt.Fprintf(&text, "): %s", mm.Content)
	}
	if len(res.Matches) == 0 {
		return textResult("Nothing remembered on the mesh matches."), out, nil
	}
	return textResult(text.String()), out, nil
}

func (m *mcpServer) forget(ctx context.Context, _ *mcp.CallToolRequest, in forgetIn) (*mcp.CallToolResult, *forgetOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	if _, err := s.as().Forget(ctx, "", in.ID); err != nil {
		return nil, nil, m.memoryError(s, err)
	}
	return textResult(fmt.Sprintf("No recall finds memory %s any more (the mesh answers the same for an id it never held: "+
		"recall shows what it holds).", in.ID)), &forgetOut{ID: in.ID}, nil
}
