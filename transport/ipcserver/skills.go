package ipcserver

import (
	"net/http"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Skill routes: each relays one request to the mesh's broker connection,
// which speaks the skill frames to the broker. The mesh is the request's
// (?mesh= or "mesh"), a session's own, or the only one (else 400
// mesh_required with the attached meshes). A broker that does not answer
// in time is a 504 broker_timeout. Each asks through meshAsk
// (memory.go).

// skillsList answers GET /v1/skills[?q=|?query=][&mesh=]: the skills whose
// name or description contains the query (all without one), by name.
func (s *Server) skillsList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("q")
	if query == "" {
		query = q.Get("query") // the upstream daemon's name
	}
	mesh, reply, err := meshAsk[*messages.SkillReply](s, r, q.Get("mesh"), &messages.SkillRequest{Op: messages.TypeListSkills, Query: query})
	if err != nil {
		writeError(w, err)
		return
	}
	out := &messages.SkillList{Skills: make([]messages.MeshSkill, len(reply.Skills))}
	for i, sk := range reply.Skills {
		out.Skills[i] = messages.MeshSkill{SkillInfo: sk, Mesh: mesh}
		out.Skills[i].Tags = nonNil(sk.Tags)
	}
	writeJSON(w, http.StatusOK, out)
}

// skillsGet answers GET /v1/skills/<name>[?mesh=]: the skill with its
// content, or 404 skill_not_found.
func (s *Server) skillsGet(w http.ResponseWriter, r *http.Request) {
	name, err := skillParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.SkillReply](s, r, r.URL.Query().Get("mesh"), &messages.SkillRequest{Op: messages.TypeGetSkill, Name: name})
	if err != nil {
		writeError(w, err)
		return
	}
	if reply.Skill == nil {
		writeError(w, messages.SkillNotFound(mesh, name))
		return
	}
	writeJSON(w, http.StatusOK, skillAnswer(mesh, reply.Skill))
}

// skillsPublish answers POST /v1/skills: 201 with a new skill (version 1),
// 200 with the replaced one's next version.
func (s *Server) skillsPublish(w http.ResponseWriter, r *http.Request) {
	var req messages.SkillPublishRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.SkillReply](s, r, req.Mesh, &messages.SkillRequest{Op: messages.TypePublishSkill, Name: req.Name,
		Description: req.Description, Content: req.Content, Tags: req.Tags})
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if reply.Skill.Version == 1 {
		status = http.StatusCreated
	}
	writeJSON(w, status, skillAnswer(mesh, reply.Skill))
}

// skillsRemove answers DELETE /v1/skills/<name>[?mesh=]: 200 whether or
// not the mesh had it (removed says which).
func (s *Server) skillsRemove(w http.ResponseWriter, r *http.Request) {
	name, err := skillParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.SkillReply](s, r, r.URL.Query().Get("mesh"), &messages.SkillRequest{Op: messages.TypeRemoveSkill, Name: name})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.SkillRemoved{OK: true, Name: name, Mesh: mesh, Removed: reply.Removed})
}

// skillParam is the <name> of /v1/skills/<name>, validated.
func skillParam(r *http.Request) (string, error) {
	name := strings.TrimPrefix(r.URL.Path, "/v1/skills/")
	return name, messages.ValidateSkillName(name)
}

func skillAnswer(mesh string, sk *messages.SkillData) *messages.SkillAnswer {
	out := &messages.SkillAnswer{Skill: messages.MeshSkill{SkillInfo: sk.SkillInfo, Content: sk.Content, Mesh: mesh}}
	out.Skill.Tags = nonNil(sk.Tags)
	return out
}
