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

// The skill tools: the mesh's skills (named instructions) through the
// daemon, as the session; skill_publish (skill_publish.go) publishes one.
type (
	skillListIn struct {
		Query string `json:"query,omitempty" jsonschema:"Text the skill's name or description must contain (any case); omit it to list them all."`
	}
	skillListOut struct {
		Skills []skillOut `json:"skills" jsonschema:"The matching skills, by name."`
	}
	skillOut struct {
		Name        string   `json:"name" jsonschema:"The skill's name: skill_get takes it."`
		Description string   `json:"description,omitempty" jsonschema:"What the skill is for."`
		Tags        []string `json:"tags,omitempty" jsonschema:"Its tags."`
		Version     int      `json:"version" jsonschema:"Its version: each publish of the name bumps it."`
		PublishedBy string   `json:"published_by" jsonschema:"Who published this version."`
	}
	skillGetIn struct {
		Name string `json:"name" jsonschema:"The skill's name, as skill_list shows it."`
	}
	skillGetOut struct {
		Skill   skillOut `json:"skill" jsonschema:"The skill."`
		Content string   `json:"content" jsonschema:"The skill's instructions."`
	}
)

func (m *mcpServer) addSkillTools() {
	addTool(m.tools, &mcp.Tool{Name: "skill_list", Title: "List skills",
		Description: "List the skills published on your mesh (named instructions any agent can follow): name, description, tags, " +
			"version and publisher. Read one with skill_get.",
		InputSchema: schemaOf[skillListIn](func(p map[string]*jsonschema.Schema) { p["query"].MaxLength = jsonschema.Ptr(256) }),
	}, m.skillList)
	addTool(m.tools, &mcp.Tool{Name: "skill_get", Title: "Read a skill",
		Description: "Read a skill's instructions by name (skill_list shows the names), to follow them.",
		InputSchema: schemaOf[skillGetIn](func(p map[string]*jsonschema.Schema) { p["name"].Pattern = `^[a-z0-9][a-z0-9._-]{0,63}$` }),
	}, m.skillGet)
}

func (m *mcpServer) skillList(ctx context.Context, _ *mcp.CallToolRequest, in skillListIn) (*mcp.CallToolResult, *skillListOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.SkillList, error) { return s.as().Skills(ctx, "", in.Query) })
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &skillListOut{Skills: make([]skillOut, len(res.Skills))}
	names := make([]string, len(res.Skills))
	for i, sk := range res.Skills {
		out.Skills[i] = skillOutOf(&sk.SkillInfo)
		names[i] = sk.Name
	}
	if len(names) == 0 {
		if in.Query != "" {
			return textResult(fmt.Sprintf("No skill matches %s; call skill_list without a query to see them all.", quoteArg(in.Query))), out, nil
		}
		return textResult("The mesh has no skills yet (a member publishes one with `claudemesh skill publish`)."), out, nil
	}
	return textResult(fmt.Sprintf("%s: %s. Read one with skill_get.", count(len(names), "skill", "skills"), strings.Join(names, ", "))), out, nil
}

func (m *mcpServer) skillGet(ctx context.Context, _ *mcp.CallToolRequest, in skillGetIn) (*mcp.CallToolResult, *skillGetOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.SkillAnswer, error) { return s.as().Skill(ctx, "", in.Name) })
	var me *messages.Error
	switch {
	case errors.As(err, &me) && (me.Code == messages.CodeSkillNotFound || me.Code == messages.CodeInvalidSkill):
		return nil, nil, fmt.Errorf("there is no skill %s on your mesh; call skill_list to see the skills", quoteArg(in.Name))
	case err != nil:
		return nil, nil, m.toolError(s, err)
	}
	out := &skillGetOut{Skill: skillOutOf(&res.Skill.SkillInfo), Content: res.Skill.Content}
	return textResult(res.Skill.Content), out, nil
}

func skillOutOf(sk *messages.SkillInfo) skillOut {
	return skillOut{Name: sk.Name, Description: sk.Description, Tags: sk.Tags, Version: sk.Version, PublishedBy: sk.PublishedBy}
}
