package ipcserver

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// withConns attaches fake broker connections (see fakeConn) by mesh slug,
// and lists them as joined meshes.
func withConns(conns map[string]*fakeConn) harnessOpt {
	return func(h *harness, o *Options) {
		o.MeshActors = map[string]*actor.PID{}
		for slug, c := range conns {
			o.MeshActors[slug] = h.spawnConn(c)
			o.Meshes = append(o.Meshes, Mesh{Info: messages.MeshInfo{Mesh: slug, MemberPubkey: "pk-" + slug}})
		}
		sort.Slice(o.Meshes, func(i, j int) bool { return o.Meshes[i].Info.Mesh < o.Meshes[j].Info.Mesh })
	}
}

type peersAnswer struct {
	Peers []struct {
		Mesh        string `json:"mesh"`
		Pubkey      string `json:"pubkey"`
		DisplayName string `json:"displayName"`
	} `json:"peers"`
}

func TestPeers(t *testing.T) {
	h := newHarness(t, withConns(map[string]*fakeConn{
		"a": {peers: []messages.Peer{{Pubkey: "p1", DisplayName: "ann"}, {Pubkey: "p2", DisplayName: "bob"}}},
		"b": {down: true},
		"c": {peers: []messages.Peer{{Pubkey: "p3", DisplayName: "cy"}}},
	}))
	var all peersAnswer
	if resp := h.do(http.MethodGet, "/v1/peers", "", &all); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got []string
	for _, p := range all.Peers {
		got = append(got, p.Mesh+"/"+p.Pubkey+"/"+p.DisplayName)
	}
	if !slices.Equal(got, []string{"a/p1/ann", "a/p2/bob", "c/p3/cy"}) {
		t.Errorf("all meshes (b down, skipped): %v", got)
	}
	var one peersAnswer
	if h.do(http.MethodGet, "/v1/peers?mesh=c", "", &one); len(one.Peers) != 1 || one.Peers[0].Mesh != "c" {
		t.Errorf("mesh c: %+v", one)
	}
	h.wantError(http.MethodGet, "/v1/peers?mesh=b", "", http.StatusServiceUnavailable, messages.CodeBrokerUnavailable)
	h.wantError(http.MethodGet, "/v1/peers?mesh=zz", "", http.StatusNotFound, messages.CodeMeshNotAttached)
}

// TestOwnProfiles: GET /v1/profile picks this member out of each mesh's
// peer list; a mesh whose connection is down, or whose list lacks this
// member, is reported in failed, or fails the request when it was named.
func TestOwnProfiles(t *testing.T) {
	h := newHarness(t, withConns(map[string]*fakeConn{
		"a": {peers: []messages.Peer{{Pubkey: "p1", DisplayName: "ann"},
			{Pubkey: "pk-a", MemberPubkey: "pk-a", DisplayName: "me", Status: "working", Summary: "s", Visible: true,
				Title: "t", Capabilities: []string{"go"}}}},
		"b": {down: true},
		"c": {peers: []messages.Peer{{Pubkey: "p3", DisplayName: "cy"}}},
	}))
	var all struct {
		Profiles []map[string]any  `json:"profiles"`
		Failed   map[string]string `json:"failed"`
	}
	if resp := h.do(http.MethodGet, "/v1/profile", "", &all); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if len(all.Profiles) != 1 {
		t.Fatalf("profiles %v, want mesh a's", all.Profiles)
	}
	p := all.Profiles[0]
	if p["mesh"] != "a" || p["member_pubkey"] != "pk-a" || p["display_name"] != "me" || p["status"] != "working" ||
		p["summary"] != "s" || p["visible"] != true || p["title"] != "t" || fmt.Sprint(p["capabilities"]) != "[go]" {
		t.Errorf("profile on a: %v", p)
	}
	if all.Failed["b"] != messages.CodeBrokerUnavailable || all.Failed["c"] != "profile_not_listed" {
		t.Errorf("failed: %v", all.Failed)
	}
	h.wantError(http.MethodGet, "/v1/profile?mesh=b", "", http.StatusServiceUnavailable, messages.CodeBrokerUnavailable)
	h.wantError(http.MethodGet, "/v1/profile?mesh=c", "", http.StatusBadGateway, "profile_not_listed")
	h.wantError(http.MethodGet, "/v1/profile?mesh=zz", "", http.StatusNotFound, messages.CodeMeshNotAttached)
}

func TestPeersNoMesh(t *testing.T) {
	h := newHarness(t)
	var raw map[string]any
	if h.do(http.MethodGet, "/v1/peers", "", &raw); raw["peers"] == nil {
		t.Fatalf("peers = %#v, want []", raw)
	}
}

type profileAnswer struct {
	Applied []string          `json:"applied"`
	Meshes  []string          `json:"meshes"`
	Failed  map[string]string `json:"failed"`
}

func TestProfile(t *testing.T) {
	a := &fakeConn{profiles: make(chan *messages.SetProfile, 4)}
	c := &fakeConn{profiles: make(chan *messages.SetProfile, 4)}
	h := newHarness(t, withConns(map[string]*fakeConn{"a": a, "b": {down: true}, "c": c}))

	var ans profileAnswer
	resp := h.do(http.MethodPost, "/v1/profile", `{"mesh":"a","status":"dnd","summary":"reviewing"}`, &ans)
	if resp.StatusCode != 200 || !slices.Equal(ans.Applied, []string{"summary", "status"}) ||
		!slices.Equal(ans.Meshes, []string{"a"}) || ans.Failed != nil {
		t.Fatalf("mesh a: %d %+v", resp.StatusCode, ans)
	}
	if m := <-a.profiles; m.Mesh != "a" || *m.Status != "dnd" || *m.Summary != "reviewing" || m.Visible != nil {
		t.Errorf("a received %+v", m)
	}

	ans = profileAnswer{}
	resp = h.do(http.MethodPost, "/v1/profile", `{"visible":false}`, &ans)
	if resp.StatusCode != 200 || !slices.Equal(ans.Applied, []string{"visible"}) ||
		!slices.Equal(ans.Meshes, []string{"a", "c"}) || ans.Failed["b"] != messages.CodeBrokerUnavailable {
		t.Fatalf("every mesh: %d %+v", resp.StatusCode, ans)
	}
	if m := <-c.profiles; m.Mesh != "c" || m.Visible == nil || *m.Visible {
		t.Errorf("c received %+v", m)
	}
	<-a.profiles

	h.wantError(http.MethodPost, "/v1/profile", `{"mesh":"b","status":"idle"}`, http.StatusServiceUnavailable, messages.CodeBrokerUnavailable)
	h.wantError(http.MethodPost, "/v1/profile", `{"mesh":"zz","status":"idle"}`, http.StatusNotFound, messages.CodeMeshNotAttached)
	h.wantError(http.MethodPost, "/v1/profile", `{}`, http.StatusBadRequest, "empty_profile")
	h.wantError(http.MethodPost, "/v1/profile", `{"mesh":"a"}`, http.StatusBadRequest, "empty_profile")
	h.wantError(http.MethodPost, "/v1/profile", `{"status":"away"}`, http.StatusBadRequest, "invalid_status")
	h.wantError(http.MethodPost, "/v1/profile", `{"nickname":"x"}`, http.StatusBadRequest, messages.CodeUnknownField)
	h.wantError(http.MethodPost, "/v1/profile", `[1]`, http.StatusBadRequest, messages.CodeInvalidJSON)
	h.wantError(http.MethodDelete, "/v1/profile", "", http.StatusMethodNotAllowed, "method_not_allowed")
}

func TestProfileEveryMeshDown(t *testing.T) {
	h := newHarness(t, withConns(map[string]*fakeConn{"b": {down: true}}))
	h.wantError(http.MethodPost, "/v1/profile", `{"summary":"x"}`, http.StatusServiceUnavailable, messages.CodeBrokerUnavailable)
}

func TestHealthMeshStatus(t *testing.T) {
	h := newHarness(t, withConns(map[string]*fakeConn{"a": {}, "b": {down: true}}))
	var body struct {
		OK     bool `json:"ok"`
		Meshes []struct {
			Mesh         string `json:"mesh"`
			MemberPubkey string `json:"member_pubkey"`
			Connected    bool   `json:"connected"`
			Breaker      string `json:"breaker"`
			LagMs        int64  `json:"lag_ms"`
			QueueDepth   *int   `json:"queue_depth"`
		} `json:"meshes"`
	}
	if resp := h.do(http.MethodGet, "/v1/health", "", &body); resp.StatusCode != 200 || !body.OK || len(body.Meshes) != 2 {
		t.Fatalf("%d %+v", resp.StatusCode, body)
	}
	a, b := body.Meshes[0], body.Meshes[1]
	if a.Mesh != "a" || a.MemberPubkey != "pk-a" || !a.Connected || a.Breaker != "closed" || a.LagMs != 12 || a.QueueDepth == nil {
		t.Errorf("a: %+v", a)
	}
	if b.Mesh != "b" || b.Connected || b.Breaker != "unknown" || b.LagMs != 0 {
		t.Errorf("b: %+v", b)
	}
}

func TestVersionFeatures(t *testing.T) {
	h := newHarness(t)
	var v messages.Version
	h.do(http.MethodGet, "/v1/version", "", &v)
	for _, f := range []string{"events", "inbox", "peers", "profile"} {
		if !slices.Contains(v.IPCFeatures, f) {
			t.Errorf("ipc_features %v lacks %s", v.IPCFeatures, f)
		}
	}
}
