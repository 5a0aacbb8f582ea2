package ipcserver

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/claudemesh/claudemesh-go/messages"
)

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
		s.names.keep(slug, lists[i].Peers, s.opts.now()) // for the sends that follow (names.go)
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
