package messages

// SendAccepted is the 202 body of POST /v1/send.
type SendAccepted struct {
	ClientMessageID string `json:"client_message_id"`
	Status          string `json:"status"` // "queued" or "inflight"
	// RecipientStatus is, for a DM, the recipient's status when the last
	// peer list the daemon has (at most 30 s old) shows it busy: working or
	// dnd; absent otherwise. HeldUntilIdle says the broker holds the
	// message until the recipient is idle (its priority is not now): its
	// agent reads it sooner only by checking its inbox.
	RecipientStatus string `json:"recipient_status,omitempty"`
	HeldUntilIdle   bool   `json:"held_until_idle,omitempty"`
}

// SendDuplicate is the 200 body of POST /v1/send for a done row whose
// fingerprint matches: the message was already accepted by the broker.
type SendDuplicate struct {
	ClientMessageID string  `json:"client_message_id"`
	BrokerMessageID *string `json:"broker_message_id"`
	HistoryID       *string `json:"history_id"`
	Duplicate       bool    `json:"duplicate"`
}

// SendConflict is the 409 body of POST /v1/send.
type SendConflict struct {
	Error                   string  `json:"error"` // always "idempotency_key_reused"
	Conflict                string  `json:"conflict"`
	DaemonFingerprintPrefix string  `json:"daemon_fingerprint_prefix"`
	ClientMessageID         string  `json:"client_message_id"`
	BrokerMessageID         *string `json:"broker_message_id,omitempty"`
	Reason                  *string `json:"reason,omitempty"`
}

// ErrorBody is the envelope of every other non-2xx answer.
type ErrorBody struct {
	Error      string          `json:"error"`
	Detail     string          `json:"detail,omitempty"`
	Candidates []PeerCandidate `json:"candidates,omitempty"` // ambiguous_recipient: the peers the name matches
	Attached   []string        `json:"attached,omitempty"`   // mesh_required: the daemon's meshes
	State      *StateView      `json:"state,omitempty"`      // state_conflict: the key as it is
}

// MeshInfo describes one joined mesh.
type MeshInfo struct {
	Mesh         string `json:"mesh"`
	MeshID       string `json:"mesh_id"`
	MemberID     string `json:"member_id"`
	MemberPubkey string `json:"member_pubkey"`
	// Agent marks another agent of this machine (`daemon add-agent`): it is
	// never a default, so adding one leaves the first agent's plain sends
	// on the mesh they always went to.
	Agent bool `json:"agent,omitempty"`
	// BrokerFeatures (GET /v1/version) are the features this mesh's broker
	// connection negotiated, absent while it is not connected.
	BrokerFeatures []string `json:"broker_features,omitempty"`
}

// Version is the body of GET /v1/version. Mesh and MemberPubkey name the
// first joined mesh, for clients that expect one daemon per mesh.
type Version struct {
	DaemonVersion            string     `json:"daemon_version"`
	IPCAPI                   string     `json:"ipc_api"`
	IPCFeatures              []string   `json:"ipc_features"`
	Protocol                 string     `json:"protocol"`
	SchemaVersion            int        `json:"schema_version"`
	BrokerFeaturesNegotiated []string   `json:"broker_features_negotiated"` // every connected mesh's, sorted (each mesh's: Meshes)
	Mesh                     string     `json:"mesh"`
	MemberPubkey             string     `json:"member_pubkey"`
	Meshes                   []MeshInfo `json:"meshes"`
	PID                      int        `json:"pid"`
	// Reload is the outcome of the last SIGHUP reload (absent before one).
	Reload *ReloadStatus `json:"reload,omitempty"`
}

// ReloadStatus is the outcome of a SIGHUP reload: Seq counts the reloads
// since the start, OK says config.toml applied (else Error says why and the
// daemon kept its settings).
type ReloadStatus struct {
	Seq   int    `json:"seq"`
	At    string `json:"at"` // RFC 3339
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// TokenRotated is the body of POST /v1/token/rotate's answer. The new
// token is not in it: it is in local-token, for whoever may read that file.
type TokenRotated struct {
	Rotated            bool   `json:"rotated"`
	PreviousValidUntil string `json:"previous_valid_until"` // RFC 3339
}

// Health is the body of GET /v1/health.
type Health struct {
	OK            bool   `json:"ok"`
	PID           int    `json:"pid"`
	UptimeS       int64  `json:"uptime_s"`
	DaemonVersion string `json:"daemon_version"`
	SchemaVersion int    `json:"schema_version"`
	DiskPressure  string `json:"disk_pressure"` // normal | high | refuse (sends answered 507) | degraded (new event streams refused too)
	Degraded      bool   `json:"degraded"`      // disk_pressure is degraded, or wal_sync_failed is set
	// WALSyncFailed names the databases whose WAL fsync failed since the
	// daemon started, with the error: sends are refused (outbox.db) or
	// nothing is acked to the broker (inbox.db) until a restart.
	WALSyncFailed string       `json:"wal_sync_failed,omitempty"`
	FsyncMode     string       `json:"fsync_mode"` // [outbox] fsync_mode in force: strict | batched_50ms | off
	Meshes        []MeshHealth `json:"meshes"`
	// Hooks is the agent-hook outbox (absent when the daemon keeps none).
	Hooks *HookHealth `json:"hooks,omitempty"`
}

// UpstreamHealth is GET /v1/health as the upstream daemon answers it
// (upstream-daemon-notes §3.2): its pid and the state of each mesh's
// broker connection (connecting, open, reconnecting or closed), by slug.
type UpstreamHealth struct {
	OK      bool              `json:"ok"`
	PID     int               `json:"pid"`
	Brokers map[string]string `json:"brokers"`
}

// MeshHealth is one mesh's part of /v1/health: the broker connection
// (Breaker: closed | open | half_open; LagMs: the last ping's round trip)
// and the outbox.
type MeshHealth struct {
	Mesh         string `json:"mesh"`
	MemberPubkey string `json:"member_pubkey"`
	Connected    bool   `json:"connected"`
	Breaker      string `json:"breaker"`
	LagMs        int64  `json:"lag_ms"`
	QueueDepth   int    `json:"queue_depth"`
	Inflight     int    `json:"inflight"`
	Dead         int    `json:"dead"`
	Revoked      bool   `json:"revoked,omitempty"` // the broker refused this member's key as revoked
	// SendPace is the pacing after the broker's rate-limit and
	// `no connected peer` refusals.
	SendPace SendPace `json:"send_pace"`
}

// DefaultMesh is the mesh a request that names none goes to: the only
// membership that is not another agent of this machine; "" when there is
// none or several (the request must name one).
func DefaultMesh(meshes []MeshInfo) string {
	def := ""
	for _, m := range meshes {
		if m.Agent {
			continue
		}
		if def != "" {
			return ""
		}
		def = m.Mesh
	}
	return def
}

// WebLogin answers POST /v1/web/login: the address that signs a browser in
// to the daemon's web view, once, until ExpiresAt (RFC 3339).
type WebLogin struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}
