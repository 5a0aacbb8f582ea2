package actors

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// SkillTimeout is how long a skill request waits for the broker's answer.
const SkillTimeout = 10 * time.Second

// Skills on a mesh's broker connection: the IPC's skill requests relayed
// as frames correlated by _reqId (messages/skill_frames.go). list_skills
// and get_skill are upstream's too; an upstream broker does not answer
// publish_skill or remove_skill, which then time out (504).

type skillCall struct {
	who *actor.PID
	req *messages.SkillRequest
}

// skillExpired is the timer of the request id.
type skillExpired struct{ id string }

// takeSkill removes and returns the skill request of id (nil: none, or
// already answered).
func (b *BrokerConn) takeSkill(id string) *skillCall {
	c, _ := b.skills.take(id)
	return c
}

// skillRequest sends the frame of one request; the answer comes back as a
// frame (skillFrame) or an error (skillError), or the timer fires.
func (b *BrokerConn) skillRequest(ctx actor.Context, m *messages.SkillRequest) {
	id := b.skills.call("sk", &skillCall{who: ctx.Sender(), req: m})
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
		b.skillAnswer(ctx, b.takeSkill(id), fmt.Errorf("unknown skill request %q", m.Op))
		return
	}
	if err := b.send(frame); err != nil {
		b.skillAnswer(ctx, b.takeSkill(id), err)
		return
	}
	workers.SendLater(ctx, SkillTimeout, &skillExpired{id: id})
}

// skillFrame takes a broker's answer to a skill request; it reports false
// for a frame that is none.
func (b *BrokerConn) skillFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.SkillListFrame:
		b.skillAnswer(ctx, b.takeSkill(f.ReqID), &messages.SkillReply{Skills: f.Skills})
	case *messages.SkillDataFrame:
		b.skillAnswer(ctx, b.takeSkill(f.ReqID), &messages.SkillReply{Skill: f.Skill})
	case *messages.SkillPublishedFrame:
		b.skillAnswer(ctx, b.takeSkill(f.ReqID), &messages.SkillReply{Skill: &f.Skill})
	case *messages.SkillRemovedFrame:
		b.skillAnswer(ctx, b.takeSkill(f.ReqID), &messages.SkillReply{Removed: f.Removed})
	default:
		return false
	}
	return true
}

// skillError answers the request an error frame names; it reports false
// for an error of no skill request.
func (b *BrokerConn) skillError(ctx actor.Context, f *messages.ErrorFrame) bool {
	call := b.takeSkill(cmp.Or(f.ReqID, f.ID))
	if call == nil {
		return false
	}
	var err error
	switch f.Code {
	case "invalid_args":
		err = refusedInput(messages.CodeInvalidSkill, f)
	case "unknown_message_type":
		err = &messages.Error{Status: http.StatusNotImplemented, Code: "unsupported_by_broker",
			Detail: fmt.Sprintf("the broker of mesh %s does not know %s (an upstream broker lists and reads skills only)", b.cfg.Slug, call.req.Op)}
	default:
		err = b.brokerRefused(f)
	}
	b.skillAnswer(ctx, call, err)
	return true
}

func (b *BrokerConn) skillExpired(ctx actor.Context, m *skillExpired) {
	call := b.takeSkill(m.id)
	if call == nil {
		return
	}
	b.skillAnswer(ctx, call, messages.BrokerTimedOut(b.cfg.Slug, call.req.Op, SkillTimeout))
}

// skillsDown fails every request in flight: the connection is gone.
func (b *BrokerConn) skillsDown(ctx actor.Context) {
	for _, call := range b.skills.drain() {
		b.skillAnswer(ctx, call, ErrNotConnected)
	}
}

// skillAnswer sends call its reply: res is a *messages.SkillReply or an
// error.
func (b *BrokerConn) skillAnswer(ctx actor.Context, call *skillCall, res any) {
	if call == nil {
		return
	}
	if err, ok := res.(error); ok {
		res = &messages.SkillReply{Err: err}
	}
	ctx.Send(call.who, res)
}
