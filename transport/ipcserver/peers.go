package ipcserver

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// healthStatusTimeout bounds how long GET /v1/health waits for a mesh's
// broker connection to report its state.
const healthStatusTimeout = 2 * time.Second

// meshPeer is one peer of GET /v1/peers: the broker's record plus its mesh.
type meshPeer struct {
	Mesh string `json:"mesh"`
	messages.Peer
}

type peersBody struct {
	Peers []meshPeer `json:"peers"`
	// Failed are the meshes, of a request naming none, whose broker
	// connection did not answer, each with why (absent when none failed).
	Failed map[string]string `json:"failed,omitempty"`
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

// peers answers GET /v1/peers[?mesh=]: the peers of the named mesh, or of
// every mesh; a mesh whose connection is down fails the request when it was
// named and is skipped (logged) otherwise.
func (s *Server) peers(w http.ResponseWriter, r *http.Request) {
	named := r.URL.Query().Get("mesh")
	slugs, err := s.meshSlugs(r, named)
	if err != nil {
		writeError(w, err)
		return
	}
	named = cmp.Or(named, sessionRoute(r))
	lists, errs := perMesh(slugs, func(slug string) (*messages.PeersList, error) {
		pid, err := s.meshActor(slug)
		if err != nil {
			return nil, err
		}
		return ask[*messages.PeersList](s, pid, &messages.ListPeers{})
	})
	body := peersBody{Peers: []meshPeer{}}
	for i, slug := range slugs {
		if errs[i] != nil {
			if named != "" {
				writeError(w, brokerError(slug, errs[i]))
				return
			}
			s.opts.Log.Warn("peers_mesh_skipped", "mesh", slug, "err", errs[i])
			if body.Failed == nil {
				body.Failed = map[string]string{}
			}
			_, eb := statusFor(brokerError(slug, errs[i]))
			body.Failed[slug] = eb.Detail
			continue
		}
		label := slug
		if sess := sessionOf(r); sess != nil {
			label = sess.Mesh // a session's peers are its mesh's
		}
		for _, p := range lists[i].Peers {
			body.Peers = append(body.Peers, meshPeer{Mesh: label, Peer: p})
		}
	}
	writeJSON(w, http.StatusOK, &body)
}

// ownProfiles answers GET /v1/profile[?mesh=]: this daemon's profile on the
// named mesh or on every mesh, read from the broker's peer list (the broker
// keeps the profile; it lists the requester even when invisible). A mesh
// whose broker is unreachable, or does not list this member, fails the
// request when it was named and is reported in failed otherwise.
func (s *Server) ownProfiles(w http.ResponseWriter, r *http.Request) {
	named := r.URL.Query().Get("mesh")
	var meshes []Mesh
	if named != "" || sessionOf(r) != nil {
		m, err := s.scope(r, named)
		if err != nil {
			writeError(w, err)
			return
		}
		meshes, named = []Mesh{*m}, m.Info.Mesh
	} else {
		meshes = s.ownMemberships()
	}
	slugs, pubkeys := make([]string, len(meshes)), make(map[string]string, len(meshes))
	for i, m := range meshes {
		slugs[i], pubkeys[m.Info.Mesh] = m.Info.Mesh, m.Info.MemberPubkey
	}
	own, errs := perMesh(slugs, func(slug string) (*messages.OwnProfile, error) {
		pid, err := s.meshActor(slug)
		if err != nil {
			return nil, err
		}
		list, err := ask[*messages.PeersList](s, pid, &messages.ListPeers{})
		if err != nil {
			return nil, brokerError(slug, err)
		}
		return findOwn(slug, pubkeys[slug], list.Peers)
	})
	body := messages.OwnProfiles{Profiles: []messages.OwnProfile{}}
	for i, slug := range slugs {
		if errs[i] == nil {
			body.Profiles = append(body.Profiles, *own[i])
			continue
		}
		if named != "" {
			writeError(w, errs[i])
			return
		}
		if body.Failed == nil {
			body.Failed = map[string]string{}
		}
		_, eb := statusFor(errs[i])
		body.Failed[slug] = eb.Error
	}
	writeJSON(w, http.StatusOK, &body)
}

// findOwn picks this member's entry out of a mesh's peer list.
func findOwn(slug, memberPubkey string, peers []messages.Peer) (*messages.OwnProfile, error) {
	for _, p := range peers {
		if p.MemberPubkey != memberPubkey && p.Pubkey != memberPubkey {
			continue
		}
		caps := p.Capabilities
		if caps == nil {
			caps = []string{}
		}
		return &messages.OwnProfile{Mesh: slug, MemberPubkey: memberPubkey, DisplayName: p.DisplayName, Status: p.Status,
			Summary: p.Summary, Visible: p.Visible, Avatar: p.Avatar, Title: p.Title, Bio: p.Bio, Capabilities: caps}, nil
	}
	return nil, &messages.Error{Status: http.StatusBadGateway, Code: "profile_not_listed",
		Detail: fmt.Sprintf("mesh %q: the broker's peer list does not include this member (%.12s…)", slug, memberPubkey)}
}

// profileBody is the 200 body of POST /v1/profile. Failed lists the meshes
// that did not apply the change when others did (absent when none failed).
type profileBody struct {
	Applied []string          `json:"applied"`
	Meshes  []string          `json:"meshes"`
	Failed  map[string]string `json:"failed,omitempty"`
}

// profile answers POST /v1/profile: the fields present change on the named
// mesh, or on every mesh.
func (s *Server) profile(w http.ResponseWriter, r *http.Request) {
	req, fields, err := decodeProfile(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	slugs, err := s.meshSlugs(r, req.Mesh)
	if err != nil {
		writeError(w, err)
		return
	}
	replies, errs := perMesh(slugs, func(slug string) (*messages.ProfileApplied, error) {
		msg := *req
		msg.Mesh = slug
		pid, err := s.meshActor(slug)
		if err != nil {
			return nil, err
		}
		return ask[*messages.ProfileApplied](s, pid, &msg)
	})
	body := profileBody{Applied: []string{}, Meshes: []string{}}
	var firstErr error
	for i, slug := range slugs {
		if errs[i] != nil {
			err := brokerError(slug, errs[i])
			if firstErr == nil {
				firstErr = err
			}
			if body.Failed == nil {
				body.Failed = map[string]string{}
			}
			_, eb := statusFor(err)
			body.Failed[slug] = eb.Error
			continue
		}
		body.Meshes = append(body.Meshes, slug)
		applied := replies[i].Applied
		if applied == nil {
			applied = fields
		}
		for _, f := range applied {
			if !slices.Contains(body.Applied, f) {
				body.Applied = append(body.Applied, f)
			}
		}
	}
	if firstErr != nil && len(body.Meshes) == 0 {
		writeError(w, firstErr) // the caller hears it: nothing to log
		return
	}
	for i, slug := range slugs { // applied elsewhere: a 200 whose failures the log keeps
		if errs[i] != nil {
			s.opts.Log.Warn("profile_not_applied", "mesh", slug, "err", brokerError(slug, errs[i]))
		}
	}
	writeJSON(w, http.StatusOK, &body)
}

// decodeProfile decodes and validates the body of POST /v1/profile and
// returns the names of the fields it sets. Every field is checked against
// its limit here, before anything is sent: a field the broker would refuse
// (or a frame too large for it, which closes the connection) is a 400.
func decodeProfile(w http.ResponseWriter, r *http.Request) (*messages.SetProfile, []string, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	defer bufPool.Put(body)
	var req messages.SetProfile
	if err := messages.DecodeJSON(body.Bytes(), &req); err != nil {
		return nil, nil, err
	}
	fields, err := req.Validate()
	if err != nil {
		return nil, nil, err
	}
	return &req, fields, nil
}

// meshHealth is one mesh's part of GET /v1/health: messages.MeshHealth plus
// withMeshStatus asks every mesh's broker connection for its state and
// returns h with the connection fields filled in; a connection that does not
// answer is reported as not connected, breaker "unknown".
func (s *Server) withMeshStatus(h *messages.Health) *messages.Health {
	slugs := make([]string, len(h.Meshes))
	for i, m := range h.Meshes {
		slugs[i] = m.Mesh
	}
	statuses, errs := perMesh(slugs, func(slug string) (*messages.MeshStatusReply, error) {
		pid, err := s.meshActor(slug)
		if err != nil {
			return nil, errors.New("no broker connection")
		}
		return askWithin[*messages.MeshStatusReply](s, pid, &messages.MeshStatus{}, healthStatusTimeout)
	})
	for i := range h.Meshes {
		m := &h.Meshes[i]
		m.Breaker = "unknown"
		if errs[i] == nil {
			m.Connected, m.Breaker, m.LagMs, m.Revoked = statuses[i].Connected, statuses[i].Breaker, statuses[i].LagMs, statuses[i].Revoked
			m.SendPace = statuses[i].Pace
		}
	}
	return h
}
