package messages

// SendPace is how one mesh's sends are paced (GET /v1/health's
// meshes[].send_pace, `claudemesh daemon status`): after a broker's
// rate-limit refusal the mesh's link pauses (PausedUntil, RFC 3339; absent
// when not paused), then sends one at a time at least PaceMs apart (0: not
// paced) with Window sends allowed to await their ack. RateLimited counts
// the refusals that paused it since the daemon started;
// DestinationBackoffs is how many destinations wait out a backoff after
// the broker answered `no connected peer` for them.
type SendPace struct {
	PausedUntil         string `json:"paused_until,omitempty"`
	PaceMs              int64  `json:"pace_ms"`
	Window              int    `json:"window"`
	RateLimited         int64  `json:"rate_limited"`
	DestinationBackoffs int    `json:"destination_backoffs"`
}
