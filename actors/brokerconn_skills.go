package actors

import (
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// SkillTimeout is how long a skill request waits for the broker's answer.
const SkillTimeout = 10 * time.Second

// Skills on a mesh's broker link: the IPC's skill requests relayed as
// frames correlated by _reqId (messages/skill_frames.go). list_skills and
// get_skill are upstream's too; an upstream broker does not answer
// publish_skill or remove_skill, which then time out (504).
type skillsRelay struct {
	b     *BrokerConn
	calls asks[*messages.SkillRequest]
}

// skillIDs prefixes the _reqId of a skill request.
const skillIDs = "sk"

// skillExpired is the timer of the request id.
type skillExpired struct{ id string }

func (r *skillsRelay) routes() relayRoutes {
	return relayRoutes{ids: skillIDs,
		messages: []route{on(r.request), on(r.expired)},
		frames:   []route{on(r.listed), on(r.data), on(r.published), on(r.removed)},
		refused:  r.refused,
		down:     r.down,
	}
}

// request sends the frame of one request; the answer comes back as a
// frame or an error, or the timer fires.
func (r *skillsRelay) request(ctx actor.Context, m *messages.SkillRequest) {
	id := r.calls.ask(skillIDs, ctx.Sender(), m)
	var frame any
	switch m.Op {
	case messages.TypeListSkills:
		frame = &messages.ListSkillsFrame{Type: m.Op, Query: m.Query, ReqID: id}
	case messages.TypeGetSkill:
		frame = &messages.GetSkillFrame{Type: m.Op, Name: m.Name, ReqID: id}
	case messages.TypePublishSkill:
		frame = &messages.PublishSkillFrame{Type: m.Op, Name: m.Name, Description: m.Description, Content: m.Content, Tags: m.Tags, ReqID: id}
	case messages.TypeRemoveSkill:
		frame = &messages.RemoveSkillFrame{Type: m.Op, Name: m.Name, ReqID: id}
	default:
		r.calls.answer(ctx, id, &messages.SkillReply{Err: fmt.Errorf("unknown skill request %q", m.Op)})
		return
	}
	if err := r.b.send(frame); err != nil {
		r.calls.answer(ctx, id, &messages.SkillReply{Err: err})
		return
	}
	workers.SendLater(ctx, SkillTimeout, &skillExpired{id: id})
}

func (r *skillsRelay) listed(ctx actor.Context, f *messages.SkillListFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.SkillReply{Skills: f.Skills})
}

func (r *skillsRelay) data(ctx actor.Context, f *messages.SkillDataFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.SkillReply{Skill: f.Skill})
}

func (r *skillsRelay) published(ctx actor.Context, f *messages.SkillPublishedFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.SkillReply{Skill: &f.Skill})
}

func (r *skillsRelay) removed(ctx actor.Context, f *messages.SkillRemovedFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.SkillReply{Removed: f.Removed})
}

func (r *skillsRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call := r.calls.pending[id]
	if call == nil {
		return false
	}
	var err error
	switch f.Code {
	case "invalid_args":
		err = refusedInput(messages.CodeInvalidSkill, f)
	case "unknown_message_type":
		err = &messages.Error{Status: http.StatusNotImplemented, Code: "unsupported_by_broker",
			Detail: fmt.Sprintf("the broker of mesh %s does not know %s (an upstream broker lists and reads skills only)", r.b.cfg.Slug, call.req.Op)}
	default:
		err = r.b.brokerRefused(f)
	}
	return r.calls.answer(ctx, id, &messages.SkillReply{Err: err})
}

func (r *skillsRelay) expired(ctx actor.Context, m *skillExpired) {
	if call := r.calls.pending[m.id]; call != nil {
		r.calls.answer(ctx, m.id, &messages.SkillReply{Err: messages.BrokerTimedOut(r.b.cfg.Slug, call.req.Op, SkillTimeout)})
	}
}

// down fails every request in flight: the connection is gone.
func (r *skillsRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.SkillReply{Err: ErrNotConnected} })
}
