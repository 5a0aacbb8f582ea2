package ipc

import (
	"strings"
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
