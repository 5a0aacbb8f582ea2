package ipcserver

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Memory routes: each relays one remember, recall or forget to the mesh's
// broker connection. The mesh is the request's (?mesh= or "mesh"), a
// session's own, or the only one (else 400 mesh_required). A broker that
// does not answer in time is a 504 broker_timeout.

// memoryRemember answers POST /v1/memory {content, tags?, mesh?} with the
// new memory's id.
func (s *Server) memoryRemember(w http.ResponseWriter, r *http.Request) {
	var req messages.RememberRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.MemoryReply](s, r, req.Mesh,
		&messages.MemoryRequest{Op: messages.TypeRemember, Content: req.Content, Tags: req.Tags})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.Remembered{ID: reply.ID, Mesh: mesh})
}

// memoryRecall answers GET /v1/memory?q=[&tag=…][&limit=][&mesh=]: the
// memories matching any word of q with every tag, best first; without q,
// the newest.
func (s *Server) memoryRecall(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidMemory,
				Detail: "limit must be a number 1-" + strconv.Itoa(messages.MaxRecallLimit) + ", got " + strconv.Quote(v)})
			return
		}
		limit = n
	}
	query, tags := cmp.Or(q.Get("q"), q.Get("query")), q["tag"]
	if err := messages.ValidateRecall(query, limit); err != nil {
		writeError(w, err)
		return
	}
	if err := messages.ValidateMemoryTags(tags); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.MemoryReply](s, r, q.Get("mesh"),
		&messages.MemoryRequest{Op: messages.TypeRecall, Query: query, Tags: tags, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	out := &messages.MemoryMatches{Mesh: mesh, Matches: make([]messages.MemoryMatch, len(reply.Memories))}
	for i, m := range reply.Memories {
		m.Tags = nonNil(m.Tags)
		out.Matches[i] = messages.MemoryMatch{MemoryInfo: m, Mesh: mesh}
	}
	writeJSON(w, http.StatusOK, out)
}

// memoryForget answers DELETE /v1/memory/<id>[?mesh=] and DELETE
// /v1/memory?id=: the memory is gone for good; one that was already gone
// is no error. An id of another form than a memory's is refused (400
// invalid_memory_id).
func (s *Server) memoryForget(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := strings.TrimPrefix(r.URL.Path, "/v1/memory/")
	if r.URL.Path == "/v1/memory" {
		id = q.Get("id")
	}
	if id == "" {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidMemory,
			Detail: "missing memory id: DELETE /v1/memory/<id>, the id remember answered"})
		return
	}
	if err := messages.ValidateMemoryID(id); err != nil {
		writeError(w, err)
		return
	}
	mesh, _, err := meshAsk[*messages.MemoryReply](s, r, q.Get("mesh"), &messages.MemoryRequest{Op: messages.TypeForget, ID: id})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.Forgotten{OK: true, ID: id, Mesh: mesh})
}
