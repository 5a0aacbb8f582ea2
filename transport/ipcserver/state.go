package ipcserver

import (
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// State routes: each relays one request to the mesh's broker connection,
// which speaks the §2.2 frames to the broker (ours or upstream's). The
// mesh is the request's (?mesh= or "mesh"), a session's own, or the only
// one; with several and none named the answer is 400 mesh_required with
// the attached meshes.

// stateGet answers GET /v1/state?key=K[&mesh=] with the key (404
// state_not_found when the mesh lacks it), and GET /v1/state[?mesh=] with
// every key of the mesh.
func (s *Server) stateGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("key") {
		mesh, reply, err := meshAsk[*messages.StateReply](s, r, q.Get("mesh"), &messages.StateRequest{Op: messages.TypeListState})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, &messages.StateList{Mesh: mesh, Entries: nonNil(reply.Entries)})
		return
	}
	key := q.Get("key")
	if err := messages.CheckStateKey(key); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.StateReply](s, r, q.Get("mesh"), &messages.StateRequest{Op: messages.TypeGetState, Key: key})
	if err != nil {
		writeError(w, err)
		return
	}
	if reply.Entry == nil || reply.Entry.UpdatedAt == "" { // the broker's answer for a missing key
		writeError(w, messages.StateNotFound(mesh, key))
		return
	}
	writeJSON(w, http.StatusOK, &messages.StateGot{State: messages.StateView{Mesh: mesh, StateInfo: *reply.Entry}})
}

// stateSet answers POST /v1/state {key, value, if_version?, mesh?} with the
// key's new version, or 409 state_conflict with the key as it is.
func (s *Server) stateSet(w http.ResponseWriter, r *http.Request) {
	var req messages.StateSetRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.StateReply](s, r, req.Mesh, &messages.StateRequest{Op: messages.TypeSetState, Key: req.Key, Value: req.Value,
		IfVersion: req.IfVersion})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.StateSetDone{OK: true, Key: req.Key, Mesh: mesh, Version: reply.Version})
}
