package messages

// Control messages: what the daemon's assembly (actors/daemon) and the IPC
// server tell the actors outside any request. None has a reply.

// MeasurePressure makes the store measure the disk pressure now (the
// limits changed on reload).
type MeasurePressure struct{}

// Retention is how long the store keeps what it may let go, in days:
// inbox rows ([inbox] retention_days) and the payloads of done and aborted
// outbox rows ([outbox] retention_days); 0 means the store's default.
type Retention struct {
	InboxDays  int
	OutboxDays int
}

// SetRetention changes the retention from the store's next pass on
// (config reload).
type SetRetention struct{ Retention Retention }

// CloseStreams tells the events actor to close every live stream and
// refuse new ones from then on (503 shutting_down): the IPC server sends
// it when its HTTP server shuts down, so that open GET /v1/events handlers
// return before the actors stop.
type CloseStreams struct{}
