package ipcserver

import (
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Lock routes: each relays one request to the mesh's broker connection
// (actors/locks.go). The mesh is the request's, a session's own, or the
// only one, as for state. A session's locks are held as its session key
// and renewed by the daemon while it lives.

// lockAcquire answers POST /v1/locks/acquire {key, repo?, ttl_ms?, wait_ms?,
// mesh?}: granted with the fence token, or not granted with the lock as its
// holder has it (after waiting up to wait_ms for it).
func (s *Server) lockAcquire(w http.ResponseWriter, r *http.Request) {
	var req messages.LockAcquireRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	mesh, reply, err := lockAsk(s, r, req.Mesh, &messages.LockRequest{Op: messages.TypeLockAcquire, Key: req.Key, Repo: req.Repo,
		TTL: messages.LockTTL(req.TTLMs), Wait: wait}, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.LockAcquired{Granted: reply.Granted, Lock: messages.LockView{Mesh: mesh, LockInfo: *reply.Lock}})
}

// lockRenew answers POST /v1/locks/renew {key, repo?, fence_token, ttl_ms?,
// mesh?} with the renewed lock, or 409 lock_not_held.
func (s *Server) lockRenew(w http.ResponseWriter, r *http.Request) {
	var req messages.LockRenewRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := lockAsk(s, r, req.Mesh, &messages.LockRequest{Op: messages.TypeLockRenew, Key: req.Key, Repo: req.Repo,
		Fence: req.FenceToken, TTL: messages.LockTTL(req.TTLMs)}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.LockAcquired{Granted: true, Lock: messages.LockView{Mesh: mesh, LockInfo: *reply.Lock}})
}

// lockRelease answers POST /v1/locks/release {key, repo?, fence_token?,
// mesh?}; releasing a lock not held answers released false.
func (s *Server) lockRelease(w http.ResponseWriter, r *http.Request) {
	var req messages.LockReleaseRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := lockAsk(s, r, req.Mesh, &messages.LockRequest{Op: messages.TypeLockRelease, Key: req.Key, Repo: req.Repo,
		Fence: req.FenceToken}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.LockReleaseDone{Released: reply.Released, Key: req.Key, Repo: req.Repo, Mesh: mesh})
}

// lockList answers GET /v1/locks[?mesh=][&repo=] with the mesh's held
// locks.
func (s *Server) lockList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := messages.CheckLockRepo(q.Get("repo")); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := lockAsk(s, r, q.Get("mesh"), &messages.LockRequest{Op: messages.TypeListLocks, Repo: q.Get("repo")}, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.LockList{Mesh: mesh, Locks: nonNil(reply.Locks)})
}

// lockAsk is meshAsk with room for the request's wait.
func lockAsk(s *Server, r *http.Request, named string, req *messages.LockRequest, wait time.Duration) (string, *messages.LockReply, error) {
	return meshAskWithin[*messages.LockReply](s, r, named, req, wait+messages.LockTimeout+time.Second)
}
