package ipc

import (
	"context"
	"net/http"
	"net/url"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Skills asks GET /v1/skills: the skills of mesh ("" for the daemon's only
// mesh, or a session's own) whose name or description contains text
// (all for "").
func (c *Client) Skills(ctx context.Context, mesh, text string) (*messages.SkillList, error) {
	var res messages.SkillList
	return &res, c.do(ctx, http.MethodGet, "/v1/skills"+query("mesh", mesh, "q", text), nil, &res)
}

// Skill asks GET /v1/skills/<name>; a name the mesh lacks is a 404
// skill_not_found *messages.Error.
func (c *Client) Skill(ctx context.Context, mesh, name string) (*messages.SkillAnswer, error) {
	var res messages.SkillAnswer
	return &res, c.do(ctx, http.MethodGet, "/v1/skills/"+url.PathEscape(name)+query("mesh", mesh), nil, &res)
}

// PublishSkill asks POST /v1/skills: the skill as stored, with its version.
func (c *Client) PublishSkill(ctx context.Context, req *messages.SkillPublishRequest) (*messages.SkillAnswer, error) {
	var res messages.SkillAnswer
	return &res, c.do(ctx, http.MethodPost, "/v1/skills", req, &res)
}

// RemoveSkill asks DELETE /v1/skills/<name>.
func (c *Client) RemoveSkill(ctx context.Context, mesh, name string) (*messages.SkillRemoved, error) {
	var res messages.SkillRemoved
	return &res, c.do(ctx, http.MethodDelete, "/v1/skills/"+url.PathEscape(name)+query("mesh", mesh), nil, &res)
}
