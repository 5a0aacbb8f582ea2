package ipcserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// What the handlers share between decoding a request and rendering its
// answer (render.go): the mesh the request acts on (its session's own,
// the one it names, or the only one), the actor that serves that mesh,
// and the one ask a handler makes of an actor, waiting in a reply box
// (replies.go) for a typed answer.

// sessionOf is the session a request calls as (nil: none).
func sessionOf(r *http.Request) *Session {
	s, _ := r.Context().Value(sessionKey{}).(*Session)
	return s
}

// sessionRoute is the route of the session a request calls as, "" for none.
func sessionRoute(r *http.Request) string {
	if sess := sessionOf(r); sess != nil {
		return sess.Route
	}
	return ""
}

// scope is the served mesh a request acts on: a session acts on its own
// route (naming its mesh, or none); anyone else on the mesh named, or the
// only membership.
func (s *Server) scope(r *http.Request, named string) (*Mesh, error) {
	sess := sessionOf(r)
	if sess == nil {
		return s.mesh(named)
	}
	if named != "" && named != sess.Mesh && named != sess.Route {
		return nil, &messages.Error{Status: http.StatusForbidden, Code: "session_scope",
			Detail: "this session belongs to mesh " + sess.Mesh + "; call without a session token to act on " + named}
	}
	return s.Served(sess.Route)
}

// Served is the served entry (membership or session route) named slug.
func (s *Server) Served(slug string) (*Mesh, error) {
	if m := s.served(slug); m != nil {
		return m, nil
	}
	return nil, &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeSessionNotConnected,
		Detail: "this session's identity is not attached (the daemon is attaching it or it was just deregistered); retry, or register it again"}
}

// served is the served entry (membership or session route) named slug,
// nil when there is none.
func (s *Server) served(slug string) *Mesh {
	meshes := s.Meshes()
	for i := range meshes {
		if meshes[i].Info.Mesh == slug {
			return &meshes[i]
		}
	}
	return nil
}

// mesh picks the membership a request goes to: the one it names, or the
// only one that is not another agent of this machine
// (messages.DefaultMesh). Sessions' routes are not among them (scope
// reaches those).
func (s *Server) mesh(slug string) (*Mesh, error) {
	meshes := s.Memberships()
	if slug == "" {
		infos := MembershipInfos(meshes)
		if slug = messages.DefaultMesh(infos); slug == "" {
			return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeMeshRequired,
				Detail: fmt.Sprintf("the daemon is attached to %d meshes; name one in \"mesh\"", len(meshes)), Attached: slugsOf(infos)}
		}
	}
	for i := range meshes {
		if meshes[i].Info.Mesh == slug {
			return &meshes[i], nil
		}
	}
	return nil, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeMeshNotAttached,
		Detail: fmt.Sprintf("the daemon is not attached to mesh %q", slug)}
}

// slugsOf lists the meshes' slugs (mesh_required's attached).
func slugsOf(infos []messages.MeshInfo) []string {
	out := make([]string, len(infos))
	for i := range infos {
		out[i] = infos[i].Mesh
	}
	return out
}

// meshSlugs lists the meshes a request acts on, sorted: a session's own
// route, the one named (checked), or else the daemon's own memberships
// (ownMemberships).
func (s *Server) meshSlugs(r *http.Request, named string) ([]string, error) {
	if sessionOf(r) != nil || named != "" {
		m, err := s.scope(r, named)
		if err != nil {
			return nil, err
		}
		return []string{m.Info.Mesh}, nil
	}
	return s.ownSlugs(), nil
}

// ownSlugs are the slugs of ownMemberships, sorted.
func (s *Server) ownSlugs() []string {
	var slugs []string
	for _, m := range s.ownMemberships() {
		slugs = append(slugs, m.Info.Mesh)
	}
	slices.Sort(slugs)
	return slugs
}

// ownMemberships are the memberships a request that names no mesh acts on:
// every one of the daemon's own, and another agent's identity (daemon
// add-agent) only for a mesh none of those is in (the first such identity
// stands for it). An agent's identity is a member of the local mesh, which
// the daemon's own membership covers: its peers are the same ones, and its
// profile is that agent's, not the caller's; it acts when named.
func (s *Server) ownMemberships() []Mesh {
	all := s.Memberships()
	own := make([]Mesh, 0, len(all))
	covered := make(map[string]bool, len(all))
	for _, agents := range []bool{false, true} {
		for _, m := range all {
			if m.Info.Agent == agents && !(agents && covered[m.Info.MeshID]) {
				own = append(own, m)
				covered[m.Info.MeshID] = true
			}
		}
	}
	return own
}

// meshActor finds the broker connection of the mesh slug names.
func (s *Server) meshActor(slug string) (*actor.PID, error) {
	s.meshMu.RLock()
	pid, ok := s.opts.MeshActors[slug]
	s.meshMu.RUnlock()
	if ok && pid != nil {
		return pid, nil
	}
	return nil, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeMeshNotAttached,
		Detail: fmt.Sprintf("the daemon is not attached to mesh %q", slug)}
}

// reply is an actor's answer that may carry the store's error.
type reply interface{ Failure() error }

// meshAsk relays req to the broker connection of the mesh the request acts
// on and returns the mesh as the answer names it (a session's own mesh
// for a session) and the reply.
func meshAsk[T reply](s *Server, r *http.Request, named string, req any) (string, T, error) {
	return meshAskWithin[T](s, r, named, req, DefaultRequestTimeout)
}

// meshAskWithin is meshAsk with a deadline of its own.
func meshAskWithin[T reply](s *Server, r *http.Request, named string, req any, timeout time.Duration) (string, T, error) {
	var zero T
	mesh, err := s.scope(r, named)
	if err != nil {
		return "", zero, err
	}
	slug := mesh.Info.Mesh
	pid, err := s.meshActor(slug)
	if err != nil {
		return "", zero, err
	}
	reply, err := askUntil[T](s, pid, req, timeout, r.Context().Done())
	if err != nil {
		return "", zero, brokerError(slug, err)
	}
	if sess := sessionOf(r); sess != nil {
		slug = sess.Mesh
	}
	return slug, reply, nil
}

// ask sends msg to pid, waits up to DefaultRequestTimeout for a reply of
// type T and returns it, or the error of the request or of the store.
func ask[T reply](s *Server, pid *actor.PID, msg any) (T, error) {
	return askWithin[T](s, pid, msg, DefaultRequestTimeout)
}

// askWithin is ask with a deadline of its own; no answer in time is
// actor.ErrTimeout.
func askWithin[T reply](s *Server, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	return askUntil[T](s, pid, msg, timeout, nil)
}

// askUntil is askWithin that also gives up when done closes (the request's
// client went away): the actor then answers no one, and a broker
// connection gives back what it was granted for the request (a lock, a
// reservation) rather than hold it for no one.
func askUntil[T reply](s *Server, pid *actor.PID, msg any, timeout time.Duration, done <-chan struct{}) (T, error) {
	var zero T
	res, ok := s.replies.ask(pid, msg, timeout, done)
	if !ok {
		return zero, actor.ErrTimeout
	}
	r, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%T answered %T, want %T", msg, res, zero)
	}
	if err := r.Failure(); err != nil {
		return zero, err
	}
	return r, nil
}

// brokerError is how a failed ask of a broker connection is rendered: an
// error the connection chose (*messages.Error) as it is, anything else
// (timeout, not connected) as 503 broker_unavailable.
func brokerError(slug string, err error) error {
	var me *messages.Error
	if errors.As(err, &me) {
		return err
	}
	return &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeBrokerUnavailable,
		Detail: fmt.Sprintf("mesh %q: the broker connection did not answer: %v", slug, err)}
}

// perMesh runs fn for each slug concurrently and returns the results in
// slug order.
func perMesh[T any](slugs []string, fn func(slug string) (T, error)) ([]T, []error) {
	out, errs := make([]T, len(slugs)), make([]error, len(slugs))
	var wg sync.WaitGroup
	for i, slug := range slugs {
		wg.Go(func() { out[i], errs[i] = fn(slug) })
	}
	wg.Wait()
	return out, errs
}

// now is the time a command to the store carries, in Unix milliseconds.
func now() int64 { return time.Now().UnixMilli() }
