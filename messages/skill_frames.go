package messages

import "regexp"

// Skill frames. list_skills and get_skill are the upstream broker's (wire
// protocol §2.2); publish_skill and remove_skill are this broker's own
// (the upstream broker answers them unknown_message_type). Each request
// carries _reqId, echoed in its answer; a refused request is an error
// frame with the _reqId in id and _reqId. The spec does not describe the
// element of skill_list: ours is SkillInfo.

// Skill frame types.
const (
	TypeListSkills     = "list_skills"
	TypeSkillList      = "skill_list"
	TypeGetSkill       = "get_skill"
	TypeSkillData      = "skill_data"
	TypePublishSkill   = "publish_skill"
	TypeSkillPublished = "skill_published"
	TypeRemoveSkill    = "remove_skill"
	TypeSkillRemoved   = "skill_removed"
)

// CodeSkillNotFound is the IPC error's code for a name the mesh has no
// skill of.
const CodeSkillNotFound = "skill_not_found"

// skillName is what a skill may be called: lower-case, so that a name is
// spelled one way.
var skillName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidSkillName reports whether name is one a skill may have: 1-64 of
// a-z 0-9 . _ -, starting with a letter or digit.
func ValidSkillName(name string) bool { return skillName.MatchString(name) }

// ListSkillsFrame asks for the mesh's skills, those whose name or
// description contains Query when it is set; the answer is
// *SkillListFrame.
type ListSkillsFrame struct {
	Type  string `json:"type"`
	Query string `json:"query,omitempty"`
	ReqID string `json:"_reqId,omitempty"`
}

// GetSkillFrame asks for one skill; the answer is *SkillDataFrame.
type GetSkillFrame struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	ReqID string `json:"_reqId,omitempty"`
}

// PublishSkillFrame publishes a skill (replacing the one of that name, its
// version bumped); the answer is *SkillPublishedFrame.
type PublishSkillFrame struct {
	Type        string   `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Content     string   `json:"content"`
	Tags        []string `json:"tags,omitempty"`
	ReqID       string   `json:"_reqId,omitempty"`
}

// RemoveSkillFrame removes a skill (none of that name: no error); the
// answer is *SkillRemovedFrame.
type RemoveSkillFrame struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	ReqID string `json:"_reqId,omitempty"`
}

// SkillInfo is one skill as skill_list lists it. PublishedBy is the
// publisher's display name at the time, PublishedByPubkey its key.
type SkillInfo struct {
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	Tags              []string `json:"tags"`
	Version           int      `json:"version"`
	PublishedBy       string   `json:"publishedBy"`
	PublishedByPubkey string   `json:"publishedByPubkey"`
	PublishedAt       string   `json:"publishedAt"`
}

// SkillData is one skill with its instructions.
type SkillData struct {
	SkillInfo
	Content string `json:"content"`
}

// SkillListFrame answers list_skills.
type SkillListFrame struct {
	Type   string      `json:"type"`
	Skills []SkillInfo `json:"skills"`
	ReqID  string      `json:"_reqId,omitempty"`
}

// SkillDataFrame answers get_skill; Skill is null when the mesh has no
// skill of that name.
type SkillDataFrame struct {
	Type  string     `json:"type"`
	Skill *SkillData `json:"skill"`
	ReqID string     `json:"_reqId,omitempty"`
}

// SkillPublishedFrame answers publish_skill with the skill as stored.
type SkillPublishedFrame struct {
	Type  string    `json:"type"`
	Skill SkillData `json:"skill"`
	ReqID string    `json:"_reqId,omitempty"`
}

// SkillRemovedFrame answers remove_skill; Removed is false when the mesh
// had no skill of that name.
type SkillRemovedFrame struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Removed bool   `json:"removed"`
	ReqID   string `json:"_reqId,omitempty"`
}

// newSkillClientFrame is the broker's decoder table of the skill requests.
func newSkillClientFrame(typ string) any {
	switch typ {
	case TypeListSkills:
		return new(ListSkillsFrame)
	case TypeGetSkill:
		return new(GetSkillFrame)
	case TypePublishSkill:
		return new(PublishSkillFrame)
	case TypeRemoveSkill:
		return new(RemoveSkillFrame)
	}
	return nil
}

// NewSkillBrokerFrame is the decoder table, for a client, of the broker's
// skill answers: a pointer to the frame struct of typ, nil for another type.
func NewSkillBrokerFrame(typ string) any {
	switch typ {
	case TypeSkillList:
		return new(SkillListFrame)
	case TypeSkillData:
		return new(SkillDataFrame)
	case TypeSkillPublished:
		return new(SkillPublishedFrame)
	case TypeSkillRemoved:
		return new(SkillRemovedFrame)
	}
	return nil
}
