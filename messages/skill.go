package messages

import (
	"fmt"
	"net/http"
	"strings"
)

// Skills on the daemon: the IPC routes /v1/skills… relay the skill frames
// (skill_frames.go) through a mesh's broker connection.

// CodeInvalidSkill is the IPC error's code for a skill request the daemon
// or the broker refused (a bad name, content too large, …).
const CodeInvalidSkill = "invalid_skill"

// CodeBrokerTimeout is the IPC error's code (504) for a request the
// mesh's broker did not answer in time.
const CodeBrokerTimeout = "broker_timeout"

// SkillRequest asks a mesh's broker connection (actors.BrokerConn) for one
// skill operation; the reply is *SkillReply. Op is a request frame type:
// TypeListSkills (Query), TypeGetSkill (Name), TypePublishSkill (Name,
// Description, Content, Tags) or TypeRemoveSkill (Name).
type SkillRequest struct {
	Op          string
	Name        string
	Query       string
	Description string
	Content     string
	Tags        []string
}

// SkillReply is the reply to *SkillRequest: Skills for a list; Skill for a
// get (nil: no such skill) and a publish; Removed for a remove.
type SkillReply struct {
	Skills  []SkillInfo
	Skill   *SkillData
	Removed bool
	Err     error
}

// Failure returns the request's error, nil on success.
func (r *SkillReply) Failure() error { return r.Err }

// SkillNotFound is the IPC error for a skill the mesh does not have.
func SkillNotFound(mesh, name string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeSkillNotFound,
		Detail: fmt.Sprintf("mesh %s has no skill %q: list them with `claudemesh skill list`", mesh, name)}
}

// IPC bodies of /v1/skills.

// MeshSkill is a skill as the daemon answers it: the broker's, with the
// mesh it came from (upstream's shape); Content is absent from a list.
type MeshSkill struct {
	SkillInfo
	Content string `json:"content,omitempty"`
	Mesh    string `json:"mesh"`
}

// SkillList answers GET /v1/skills.
type SkillList struct {
	Skills []MeshSkill `json:"skills"`
}

// SkillAnswer answers GET /v1/skills/<name> and POST /v1/skills (200
// replaced, 201 new).
type SkillAnswer struct {
	Skill MeshSkill `json:"skill"`
}

// SkillRemoved answers DELETE /v1/skills/<name>; Removed is false when
// the mesh had no skill of that name (removing is idempotent).
type SkillRemoved struct {
	OK      bool   `json:"ok"`
	Name    string `json:"name"`
	Mesh    string `json:"mesh"`
	Removed bool   `json:"removed"`
}

// SkillPublishRequest is the body of POST /v1/skills.
type SkillPublishRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Content     string   `json:"content"`
	Tags        []string `json:"tags,omitempty"`
	Mesh        string   `json:"mesh,omitempty"`
}

// Validate checks what the daemon can: the name and that there is
// content. The broker checks the sizes and tags (its limits).
func (r *SkillPublishRequest) Validate() error {
	if err := ValidateSkillName(r.Name); err != nil {
		return err
	}
	if strings.TrimSpace(r.Content) == "" {
		return badRequest(CodeInvalidSkill, "content is required: the skill's instructions")
	}
	return nil
}

// ValidateSkillName is nil for a name a skill may have, else a 400
// invalid_skill saying what a name is.
func ValidateSkillName(name string) error {
	if !ValidSkillName(name) {
		return badRequest(CodeInvalidSkill,
			"a skill name is 1-64 of a-z 0-9 . _ - starting with a letter or digit, got %q", name)
	}
	return nil
}
