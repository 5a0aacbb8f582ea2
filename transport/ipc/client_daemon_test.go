package ipc

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestIdentifyDaemon: an answer naming its pid is ours, upstream's exact
// shape (no pid, no meshes) is upstream's, and anything else is refused with
// what is wrong.
func TestIdentifyDaemon(t *testing.T) {
	upstreamFeatures := []string{"version", "health", "send", "inbox", "events", "peers", "profile", "skills", "state", "memory", "sessions"}
	cases := []struct {
		name     string
		v        messages.Version
		kind     string
		refusal  string
		missing  string // a feature Require must refuse
		included string // a feature Offers must find
	}{
		{name: "ours", v: messages.Version{DaemonVersion: "0.9.0", IPCAPI: "v1", IPCFeatures: []string{"version", "health", "send", "outbox", "events", "inbox", "peers"}, PID: 4242,
			Meshes: []messages.MeshInfo{{Mesh: "demo"}}}, kind: DaemonOurs, included: "outbox", missing: "skills"},
		{name: "upstream", v: messages.Version{DaemonVersion: "1.37.0", IPCAPI: "v1", IPCFeatures: upstreamFeatures, SchemaVersion: 1},
			kind: DaemonUpstream, included: "peers", missing: "outbox"},
		{name: "upstream minor", v: messages.Version{DaemonVersion: "2.0.0", IPCAPI: "v1.2"}, kind: DaemonUpstream, missing: "send"},
		{name: "not claudemesh", v: messages.Version{}, refusal: "not a claudemesh daemon answer"},
		{name: "no version", v: messages.Version{IPCAPI: "v1", PID: 1}, refusal: "not a claudemesh daemon answer"},
		{name: "other api", v: messages.Version{DaemonVersion: "3.0.0", IPCAPI: "v2"}, refusal: "speaks ipc v2"},
		{name: "v10 is not v1", v: messages.Version{DaemonVersion: "3.0.0", IPCAPI: "v10"}, refusal: "speaks ipc v10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := IdentifyDaemon(&tc.v)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("IdentifyDaemon = %+v, %v; want an error saying %q", d, err, tc.refusal)
				}
				return
			}
			if err != nil || d.Kind != tc.kind || d.Version != tc.v.DaemonVersion || d.PID != tc.v.PID {
				t.Fatalf("IdentifyDaemon = %+v, %v; want kind %s", d, err, tc.kind)
			}
			if tc.kind == DaemonUpstream && d.Meshes != nil {
				t.Errorf("upstream's version names no meshes, got %v", d.Meshes)
			}
			if tc.included != "" && (!d.Offers(tc.included) || d.Require(tc.included, "x") != nil) {
				t.Errorf("%s is offered: Offers %v", tc.included, d.Offers(tc.included))
			}
			err = d.Require(tc.missing, "claudemesh thing")
			if err == nil || !strings.Contains(err.Error(), `"`+tc.missing+`"`) || !strings.Contains(err.Error(), "claudemesh thing") ||
				!strings.Contains(err.Error(), d.String()) {
				t.Errorf("Require(%s) = %v; want an error naming the feature, the command and the daemon", tc.missing, err)
			}
		})
	}
}

// TestRequireAsksUnlistedRoute, Require twice: a feature the daemon lists
// is used without a request; one it does not list but whose route answers
// is used, the route asked once; one whose route does not answer (asked
// each time), or that has no route to ask, is refused naming the feature
// and what the route answered.
func TestRequireAsksUnlistedRoute(t *testing.T) {
	cases := []struct {
		name, feature string
		listed        bool
		status        int    // the answer of the feature's route
		refusal       string // "" when the feature is to be used
		asked         int32  // requests of the route by the two calls
	}{
		{name: "listed", feature: "outbox", listed: true, status: 200},
		{name: "served unlisted (upstream's outbox)", feature: "outbox", status: 200, asked: 1},
		{name: "not served", feature: "outbox", status: 404, refusal: `"outbox" ipc feature`, asked: 2},
		{name: "unavailable", feature: "audit", status: 503, refusal: "answered 503", asked: 2},
		{name: "no route to ask", feature: "mail", status: 200, refusal: `"mail" ipc feature`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			s := serveSocket(t, filepath.Join(t.TempDir(), "d.sock"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				if r.Method != http.MethodGet || r.URL.RequestURI() != featureProbes[tc.feature] {
					t.Errorf("asked %s %s", r.Method, r.URL.RequestURI())
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, `{"items":[]}`)
			}))
			d := &Daemon{Kind: DaemonUpstream, Version: "1.37.0", Features: []string{"send"}}
			if tc.listed {
				d.Features = append(d.Features, tc.feature)
			}
			c := NewClient(s.path)
			for range 2 {
				err := c.Require(t.Context(), d, tc.feature, "claudemesh thing")
				if tc.refusal == "" && err != nil || tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)) {
					t.Fatalf("Require = %v; want refusal %q", err, tc.refusal)
				}
				if tc.refusal == "" && !d.Offers(tc.feature) {
					t.Fatalf("%s served but not offered after Require", tc.feature)
				}
			}
			if n := asked.Load(); n != tc.asked {
				t.Errorf("route asked %d times, want %d", n, tc.asked)
			}
		})
	}
}
