package broker

import (
	"context"
	"errors"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Skills: list_skills and get_skill as upstream answers them (wire
// protocol §2.2), publish_skill and remove_skill our own. A connection
// acts for its member; a session connection publishes as the member it
// belongs to. Errors carry the request's _reqId in both id and _reqId.

// skillFrames are the skill requests.
var skillFrames = frames{
	answers((*conn).listSkills),
	answers((*conn).getSkill),
	answers((*conn).publishSkill),
	answers((*conn).removeSkill),
}

func (c *conn) listSkills(f *messages.ListSkillsFrame) {
	skills, err := c.store.Skills(context.Background(), c.mesh.ID, f.Query)
	if err != nil {
		c.skillError(f.ReqID, err)
		return
	}
	out := &messages.SkillListFrame{Type: messages.TypeSkillList, Skills: make([]messages.SkillInfo, len(skills)), ReqID: f.ReqID}
	for i := range skills {
		out.Skills[i] = skillInfo(&skills[i])
	}
	c.sendFrame(out)
}

func (c *conn) getSkill(f *messages.GetSkillFrame) {
	out := &messages.SkillDataFrame{Type: messages.TypeSkillData, ReqID: f.ReqID}
	sk, err := c.store.Skill(context.Background(), c.mesh.ID, f.Name)
	switch {
	case errors.Is(err, broker.ErrSkillNotFound):
	case err != nil:
		c.skillError(f.ReqID, err)
		return
	default:
		out.Skill = skillData(sk)
	}
	c.sendFrame(out)
}

func (c *conn) publishSkill(f *messages.PublishSkillFrame) {
	if c.legacy != nil {
		return // upstream has no publish_skill, and ignores the frame types it does not know
	}
	sk, err := c.store.PublishSkill(context.Background(), c.mesh.ID, c.member.ID,
		broker.NewSkill{Name: f.Name, Description: f.Description, Content: f.Content, Tags: f.Tags})
	if err != nil {
		c.skillError(f.ReqID, err)
		return
	}
	c.log.Info("skill_published", "conn", c.id, "skill", sk.Name, "version", sk.Version)
	c.sendFrame(&messages.SkillPublishedFrame{Type: messages.TypeSkillPublished, Skill: *skillData(sk), ReqID: f.ReqID})
}

func (c *conn) removeSkill(f *messages.RemoveSkillFrame) {
	if c.legacy != nil {
		return // as publish_skill
	}
	removed, err := c.store.RemoveSkill(context.Background(), c.mesh.ID, c.member.ID, f.Name)
	if err != nil {
		c.skillError(f.ReqID, err)
		return
	}
	if removed {
		c.log.Info("skill_removed", "conn", c.id, "skill", f.Name)
	}
	c.sendFrame(&messages.SkillRemovedFrame{Type: messages.TypeSkillRemoved, Name: f.Name, Removed: removed, ReqID: f.ReqID})
}

// skillError answers a failed skill request: invalid_args for a refused
// field, revoked for a member revoked meanwhile, internal (logged) for a
// store failure.
func (c *conn) skillError(reqID string, err error) {
	code, msg := codeInternal, "the broker could not read or write its skills; try again"
	switch {
	case errors.Is(err, broker.ErrInvalid):
		code, msg = codeInvalidArgs, err.Error()
	case errors.Is(err, broker.ErrMemberRevoked):
		code, msg = "revoked", "this member was revoked"
	default:
		c.log.Error("skill_request_failed", "conn", c.id, "err", err)
	}
	c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: code, Message: msg, ID: reqID, ReqID: reqID})
}

func skillInfo(sk *broker.Skill) messages.SkillInfo {
	tags := sk.Tags
	if tags == nil {
		tags = []string{}
	}
	return messages.SkillInfo{Name: sk.Name, Description: sk.Description, Tags: tags, Version: sk.Version,
		PublishedBy: sk.PublishedName, PublishedByPubkey: sk.PublishedBy, PublishedAt: isoTime(sk.PublishedAt)}
}

func skillData(sk *broker.Skill) *messages.SkillData {
	return &messages.SkillData{SkillInfo: skillInfo(sk), Content: sk.Content}
}
