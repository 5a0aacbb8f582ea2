package ipcserver

import (
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Reservation routes: each relays one request to the mesh's broker
// connection (actors/reservations.go). The mesh is the request's, a
// session's own, or the only one, as for locks. A session's reservations
// are held as its session key and renewed by the daemon while it lives.

// reserve answers POST /v1/reservations {repo, patterns, shared?, ttl_ms?,
// wait_ms?, force?, mesh?}: granted with the fence token, or refused with
// the conflicts (after waiting up to wait_ms for them to go).
func (s *Server) reserve(w http.ResponseWriter, r *http.Request) {
	var req messages.ReserveRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	mesh, reply, err := reservationAsk(s, r, req.Mesh, &messages.ReservationRequest{Op: messages.TypeReserve, Repo: req.Repo,
		Patterns: req.Patterns, Exclusive: !req.Shared, TTL: messages.ReservationTTL(req.TTLMs), Wait: wait, Force: req.Force}, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	f := reply.Result
	writeJSON(w, http.StatusOK, &messages.Reserved{Mesh: mesh, Granted: f.Granted, Repo: f.Repo, FenceToken: f.FenceToken,
		Reservations: nonNil(f.Reservations), Conflicts: nonNil(f.Conflicts), Forced: f.Forced})
}

// releaseReservations answers POST /v1/reservations/release {repo,
// patterns?, mesh?} with the patterns released (none: all of the caller's
// in the repository).
func (s *Server) releaseReservations(w http.ResponseWriter, r *http.Request) {
	var req messages.ReleaseReservationsRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := reservationAsk(s, r, req.Mesh, &messages.ReservationRequest{Op: messages.TypeReservationRelease, Repo: req.Repo,
		Patterns: req.Patterns}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.ReservationsReleased{Mesh: mesh, Repo: req.Repo, Released: nonNil(reply.Released)})
}

// checkReservations answers POST /v1/reservations/check {repo, paths,
// mesh?} with the paths another holder reserves exclusively (the commit
// guard's question).
func (s *Server) checkReservations(w http.ResponseWriter, r *http.Request) {
	var req messages.CheckPathsRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := reservationAsk(s, r, req.Mesh, &messages.ReservationRequest{Op: messages.TypeReservationCheck, Repo: req.Repo,
		Paths: req.Paths}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.PathCheck{Mesh: mesh, Conflicts: nonNil(reply.Check)})
}

// reservationList answers GET /v1/reservations[?mesh=][&repo=] with the
// mesh's standing reservations.
func (s *Server) reservationList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if repo := q.Get("repo"); repo != "" {
		if err := messages.CheckReservationRepo(repo); err != nil {
			writeError(w, err)
			return
		}
	}
	mesh, reply, err := reservationAsk(s, r, q.Get("mesh"), &messages.ReservationRequest{Op: messages.TypeListReservations,
		Repo: q.Get("repo")}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.ReservationList{Mesh: mesh, Reservations: nonNil(reply.List)})
}

// reservationAsk is meshAsk with room for the request's wait.
func reservationAsk(s *Server, r *http.Request, named string, req *messages.ReservationRequest, wait time.Duration) (string,
	*messages.ReservationReply, error) {
	return meshAskWithin[*messages.ReservationReply](s, r, named, req, wait+messages.ReservationTimeout+time.Second)
}
