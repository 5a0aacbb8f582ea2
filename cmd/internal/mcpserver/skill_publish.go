package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// skill_publish: a skill published on the session's mesh, as `claudemesh
// skill publish` does.
type skillPublishIn struct {
	Name        string   `json:"name" jsonschema:"The skill's name: 1-64 of a-z 0-9 . _ - starting with a letter or digit. Publishing a name the mesh has replaces that skill and bumps its version."`
	Content     string   `json:"content" jsonschema:"The skill's instructions (text, at most 64 KiB)."`
	Description string   `json:"description,omitempty" jsonschema:"One line on what the skill is for, shown by skill_list and matched by its query."`
	Tags        []string `json:"tags,omitempty" jsonschema:"Tags for the skill."`
}

// maxSkillContent is the broker's bound on a skill's instructions.
const maxSkillContent = 64 << 10

func (m *mcpServer) addSkillPublishTool() {
	addTool(m.tools, &mcp.Tool{Name: "skill_publish", Title: "Publish a skill",
		Description: "Publish a skill on your mesh: named instructions any agent can list (skill_list) and follow (skill_get). " +
			"Publishing a name the mesh has replaces it, as a new version.",
		InputSchema: schemaOf[skillPublishIn](func(p map[string]*jsonschema.Schema) {
			p["name"].Pattern = `^[a-z0-9][a-z0-9._-]{0,63}$`
			p["content"].MinLength, p["content"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(maxSkillContent)
			p["description"].MaxLength = jsonschema.Ptr(512)
			p["tags"].MaxItems = jsonschema.Ptr(16)
			p["tags"].Items = &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(64)}
		}),
	}, m.skillPublish)
}

func (m *mcpServer) skillPublish(ctx context.Context, _ *mcp.CallToolRequest, in skillPublishIn) (*mcp.CallToolResult, *skillGetOut, error) {
	req := &messages.SkillPublishRequest{Name: in.Name, Description: in.Description, Content: in.Content, Tags: in.Tags}
	if err := req.Validate(); err != nil {
		return nil, nil, argumentError(err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.SkillAnswer, error) { return s.as().PublishSkill(ctx, req) })
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeInvalidSkill:
		return nil, nil, fmt.Errorf("the mesh's broker refused the skill (%s); nothing was published: fix it and call again", me.Detail)
	case err != nil:
		return nil, nil, m.toolError(s, err)
	}
	out := &skillGetOut{Skill: skillOutOf(&res.Skill.SkillInfo), Content: res.Skill.Content}
	return textResult(fmt.Sprintf("Published skill %s, version %d: agents of your mesh read it with skill_get.",
		res.Skill.Name, res.Skill.Version)), out, nil
}
