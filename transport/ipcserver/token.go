package ipcserver

import (
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TokenGrace is how long the bearer token a rotation replaced is still
// accepted, so that requests already made with it finish (spec §3.2).
const TokenGrace = 60 * time.Second

// bearerTokens are the tokens TCP callers may present: the current one,
// and the one before it until previousUntil.
type bearerTokens struct {
	current, previous []byte
	previousUntil     time.Time
}

// rotateToken mints a new bearer token (local-token is replaced); the old
// one is accepted for TokenGrace more. The route is for the Unix socket
// only: a TCP caller holds the token this would replace, and the socket's
// file permissions are what authorise a new one.
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) {
	if s.opts.RotateToken == nil {
		writeError(w, &messages.Error{Status: http.StatusNotImplemented, Code: "not_implemented", Detail: "this daemon cannot rotate its token"})
		return
	}
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	tok, err := s.opts.RotateToken()
	if err != nil {
		s.opts.Log.Error("local_token_rotation_failed", "err", err)
		writeError(w, &messages.Error{Status: http.StatusInternalServerError, Code: "token_rotation_failed",
			Detail: "the token was not rotated (the old one stays): " + err.Error()})
		return
	}
	until := s.opts.now().Add(TokenGrace)
	s.tokens.Store(&bearerTokens{current: []byte(tok), previous: s.tokens.Load().current, previousUntil: until})
	s.metrics.TokenRotations.Inc()
	s.opts.Log.Info("local_token_rotated", "previous_valid_until", until.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusOK, &messages.TokenRotated{Rotated: true, PreviousValidUntil: until.UTC().Format(time.RFC3339Nano)})
}
