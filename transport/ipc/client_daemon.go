package ipc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Kinds of daemon a client may find on the socket.
const (
	// DaemonOurs is this project's daemon: its GET /v1/version names its
	// pid and its meshes.
	DaemonOurs = "claudemesh-go"
	// DaemonUpstream is the upstream TypeScript daemon: its GET /v1/version
	// is daemon_version, ipc_api, ipc_features and schema_version alone.
	DaemonUpstream = "upstream"
)

// Daemon is the daemon that answered GET /v1/version, as the CLI's --json
// output names it ("daemon":{"kind":…,"version":…}). Features and Meshes
// decide what the CLI may ask of it.
type Daemon struct {
	Kind    string `json:"kind"`
	Version string `json:"version"`
	PID     int    `json:"pid,omitempty"`
	// Features are its ipc_features: a client asks for nothing else.
	Features []string `json:"-"`
	// Meshes are the meshes it serves: from GET /v1/version (ours), or
	// the keys of GET /v1/health's brokers (upstream, when it offers
	// health; nil otherwise).
	Meshes []messages.MeshInfo `json:"-"`
	// Health is upstream's answer of GET /v1/health (nil: ours, or an
	// upstream daemon that does not offer health).
	Health *messages.UpstreamHealth `json:"-"`
}

// IdentifyDaemon tells which daemon wrote an answer of GET /v1/version.
// An answer without ipc_api and daemon_version is no claudemesh daemon's;
// one of another ipc_api than v1 is one this client cannot speak to.
func IdentifyDaemon(v *messages.Version) (*Daemon, error) {
	if v.IPCAPI == "" || v.DaemonVersion == "" {
		return nil, errors.New("GET /v1/version: not a claudemesh daemon answer (no ipc_api or daemon_version)")
	}
	if v.IPCAPI != "v1" && !strings.HasPrefix(v.IPCAPI, "v1.") {
		return nil, fmt.Errorf("the daemon speaks ipc %s and this claudemesh speaks v1: use a claudemesh of the daemon's version", v.IPCAPI)
	}
	d := &Daemon{Kind: DaemonUpstream, Version: v.DaemonVersion, Features: v.IPCFeatures}
	if v.PID != 0 {
		d.Kind, d.PID, d.Meshes = DaemonOurs, v.PID, v.Meshes
	}
	return d, nil
}

// String names the daemon in messages: "daemon 1.2.0 (pid 4242)" or
// "upstream daemon 1.37.0".
func (d *Daemon) String() string {
	if d.Kind == DaemonUpstream {
		return "upstream daemon " + d.Version
	}
	return fmt.Sprintf("daemon %s (pid %d)", d.Version, d.PID)
}

// Offers reports whether the daemon advertises the ipc feature f.
func (d *Daemon) Offers(f string) bool { return slices.Contains(d.Features, f) }

// Require is nil when the daemon advertises the ipc feature f; otherwise
// it says that what needs it cannot be done with this daemon.
func (d *Daemon) Require(f, what string) error {
	if d.Offers(f) {
		return nil
	}
	return fmt.Errorf("the running %s does not offer the %q ipc feature, which %s needs (it offers: %s)",
		d, f, what, strings.Join(d.Features, ", "))
}

// featureProbes are the ipc features a daemon may serve without listing
// them, each with a request of the feature's own route that reads and
// changes nothing: Client.Require asks it once before it refuses a
// feature the daemon does not list. Upstream's daemon answers
// GET /v1/outbox and leaves outbox out of its ipc_features
// (upstream-daemon-notes §3.2).
var featureProbes = map[string]string{
	"outbox": "/v1/outbox?limit=1",
	"audit":  "/v1/audit?limit=1",
}

// Require is nil when the daemon d serves the ipc feature f: it lists it,
// or it does not but the feature's own route answers (featureProbes),
// asked once — f is then added to d.Features. Otherwise it is
// d.Require's refusal, with what the route answered; a failure to ask
// (the daemon gone) is returned as it is.
func (c *Client) Require(ctx context.Context, d *Daemon, f, what string) error {
	path, probe := featureProbes[f]
	if d.Offers(f) || !probe {
		return d.Require(f, what)
	}
	_, err := c.raw(ctx, http.MethodGet, path, nil)
	var answered *messages.Error
	switch {
	case errors.As(err, &answered):
		return fmt.Errorf("%w (GET %s answered %d %s)", d.Require(f, what), path, answered.Status, answered.Code)
	case err != nil:
		return err
	}
	d.Features = append(slices.Clip(d.Features), f)
	return nil
}

// Daemon asks GET /v1/version and identifies the daemon (Identify).
func (c *Client) Daemon(ctx context.Context) (*Daemon, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return nil, err
	}
	return c.Identify(ctx, v)
}

// Identify identifies the daemon that answered v (IdentifyDaemon) and, for
// an upstream daemon that offers health, reads its health and the meshes
// it serves from GET /v1/health: its brokers, one per mesh.
func (c *Client) Identify(ctx context.Context, v *messages.Version) (*Daemon, error) {
	d, err := IdentifyDaemon(v)
	if err != nil || d.Kind != DaemonUpstream || !d.Offers("health") {
		return d, err
	}
	var h messages.UpstreamHealth
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h); err != nil {
		return nil, fmt.Errorf("the %s answered GET /v1/version but not GET /v1/health: %w", d, err)
	}
	d.Health, d.Meshes = &h, []messages.MeshInfo{}
	for slug := range h.Brokers {
		d.Meshes = append(d.Meshes, messages.MeshInfo{Mesh: slug})
	}
	slices.SortFunc(d.Meshes, func(a, b messages.MeshInfo) int { return strings.Compare(a.Mesh, b.Mesh) })
	return d, nil
}

// WebLogin asks POST /v1/web/login for a one-time link that signs a
// browser in to the daemon's web view.
func (c *Client) WebLogin(ctx context.Context) (*messages.WebLogin, error) {
	var res messages.WebLogin
	return &res, c.do(ctx, http.MethodPost, "/v1/web/login", struct{}{}, &res)
}
