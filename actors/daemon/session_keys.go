package daemon

import (
	"time"

	"github.com/claudemesh/claudemesh-go/config"
)

// DefaultKeySweepInterval is how often, besides at the start, the key
// files of sessions that ended long ago are removed.
const DefaultKeySweepInterval = 24 * time.Hour

// A session's key file (config.Paths.SessionKey) outlives the session, so
// that the session id registered again speaks with the same key and
// receives what was queued for it. The sweep removes the files of the
// sessions not registered whose key went unused for
// config.SessionKeyRetention: a session's registration and its end stamp
// its file (touchKey).

// sessionRef names a session's key file.
type sessionRef struct{ mesh, id string }

// sweepKeys removes the key files of the sessions not registered (nor
// aliases of one) whose key went unused since before now less
// config.SessionKeyRetention; the daemon calls it at its start and every
// KeySweepInterval.
func (s *sessions) sweepKeys(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	keep := map[sessionRef]bool{}
	for _, rec := range s.records {
		keep[sessionRef{rec.Mesh, rec.SessionID}] = true
		for _, a := range rec.Aliases {
			keep[sessionRef{rec.Mesh, a}] = true
		}
	}
	removed, err := s.d.opts.Paths.SweepSessionKeys(now.Add(-config.SessionKeyRetention),
		func(mesh, id string) bool { return keep[sessionRef{mesh, id}] })
	if len(removed) > 0 {
		s.d.log.Info("session_keys_removed", "count", len(removed), "unused_for", config.SessionKeyRetention.String())
	}
	if err != nil {
		s.d.log.Warn("session_key_sweep_failed", "err", err)
	}
}

// touchKey stamps the key file of session id on mesh as used now.
func (s *sessions) touchKey(mesh, id string) {
	if err := s.d.opts.Paths.TouchSessionKey(mesh, id, time.Now()); err != nil {
		s.d.log.Warn("session_key_touch_failed", "session", id, "mesh", mesh, "err", err)
	}
}
