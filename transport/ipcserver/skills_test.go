package ipcserver

import (
	"net/http"
	"slices"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// withMeshes lists joined meshes that have no broker connection: what a
// route refuses before it asks one.
func withMeshes(slugs ...string) harnessOpt {
	return func(_ *harness, o *Options) {
		for _, slug := range slugs {
			o.Meshes = append(o.Meshes, Mesh{Info: messages.MeshInfo{Mesh: slug}})
		}
	}
}

// TestSkillRoutesRefuse: what the skill routes refuse before any broker is
// asked — the mesh (400 mesh_required with the attached meshes when two
// are and none is named, 404 mesh_not_attached), the name, the body.
func TestSkillRoutesRefuse(t *testing.T) {
	h := newHarness(t, withMeshes("alpha", "beta"))
	var eb messages.ErrorBody
	if resp := h.do(http.MethodGet, "/v1/skills", "", &eb); resp.StatusCode != http.StatusBadRequest ||
		eb.Error != messages.CodeMeshRequired || !slices.Equal(eb.Attached, []string{"alpha", "beta"}) {
		t.Errorf("GET /v1/skills with two meshes: %d %+v; want 400 mesh_required naming alpha and beta", resp.StatusCode, eb)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{http.MethodGet, "/v1/skills?mesh=zz", "", http.StatusNotFound, messages.CodeMeshNotAttached},
		{http.MethodGet, "/v1/skills/deploy?mesh=zz", "", http.StatusNotFound, messages.CodeMeshNotAttached},
		{http.MethodDelete, "/v1/skills/deploy", "", http.StatusBadRequest, messages.CodeMeshRequired},
		{http.MethodGet, "/v1/skills/Deploy?mesh=alpha", "", http.StatusBadRequest, messages.CodeInvalidSkill},
		{http.MethodDelete, "/v1/skills/a%20b?mesh=alpha", "", http.StatusBadRequest, messages.CodeInvalidSkill},
		{http.MethodPost, "/v1/skills", `{"name":"deploy","content":"x"}`, http.StatusBadRequest, messages.CodeMeshRequired},
		{http.MethodPost, "/v1/skills", `{"name":"-x","content":"x","mesh":"alpha"}`, http.StatusBadRequest, messages.CodeInvalidSkill},
		{http.MethodPost, "/v1/skills", `{"name":"deploy","content":" ","mesh":"alpha"}`, http.StatusBadRequest, messages.CodeInvalidSkill},
		{http.MethodPost, "/v1/skills", `{"name":"deploy","content":"x","version":2}`, http.StatusBadRequest, messages.CodeUnknownField},
		{http.MethodPost, "/v1/skills", `{"name":"deploy","content":7}`, http.StatusBadRequest, messages.CodeInvalidJSON},
		{http.MethodPut, "/v1/skills", "", http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		h.wantError(c.method, c.path, c.body, c.status, c.code)
	}
}
