package ipcserver

import (
	"fmt"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// nodes answers GET /v1/nodes[?mesh=]: the daemons of the mesh (the
// named one, a session's own, or the only one) with their state, as the
// mesh's broker lists them. A broker that does not list nodes is 501
// nodes_unsupported.
func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		if name != "mesh" {
			writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidQuery,
				Detail: fmt.Sprintf("GET /v1/nodes takes only ?mesh=SLUG, not %q", name)})
			return
		}
	}
	if len(q["mesh"]) > 1 {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidQuery,
			Detail: fmt.Sprintf("GET /v1/nodes takes one ?mesh=, not %d", len(q["mesh"]))})
		return
	}
	mesh, reply, err := meshAsk[*messages.NodesReply](s, r, q.Get("mesh"), &messages.NodesRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.NodeList{Mesh: mesh, Nodes: nonNil(reply.Nodes), StaleAfterMs: reply.StaleAfterMs})
}
