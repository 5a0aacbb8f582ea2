package ipcserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Topic routes: each relays one request to the mesh's broker connection,
// which speaks the §2.7 frames to the broker (ours or upstream's). The
// mesh is the request's (?mesh= or "mesh"), a session's own, or the only
// one.

// topicsList answers GET /v1/topics[?mesh=].
func (s *Server) topicsList(w http.ResponseWriter, r *http.Request) {
	mesh, reply, err := meshAsk[*messages.TopicReply](s, r, r.URL.Query().Get("mesh"), &messages.TopicRequest{Op: messages.TypeTopicList})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.TopicList{Mesh: mesh, Topics: nonNil(reply.Topics)})
}

// topicsCreate answers POST /v1/topics: 201 with the new topic, 200 with
// the existing topic of that name (joined).
func (s *Server) topicsCreate(w http.ResponseWriter, r *http.Request) {
	var req messages.TopicCreateRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.TopicReply](s, r, req.Mesh, &messages.TopicRequest{Op: messages.TypeTopicCreate, Name: req.Name,
		Description: req.Description, Visibility: req.Visibility})
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if reply.Created.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, &messages.TopicCreated{Mesh: mesh, Topic: reply.Created.Topic, Created: reply.Created.Created})
}

func (s *Server) topicsJoin(w http.ResponseWriter, r *http.Request) {
	s.topicMembership(w, r, messages.TypeTopicJoin)
}
func (s *Server) topicsLeave(w http.ResponseWriter, r *http.Request) {
	s.topicMembership(w, r, messages.TypeTopicLeave)
}

// topicMembership answers POST /v1/topics/join and /leave with the topic's
// members after the change.
func (s *Server) topicMembership(w http.ResponseWriter, r *http.Request, op string) {
	var req messages.TopicMembershipRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if op == messages.TypeTopicLeave && req.Role != "" {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidTopic, Detail: "leave takes no role"})
		return
	}
	mesh, reply, err := meshAsk[*messages.TopicReply](s, r, req.Mesh, &messages.TopicRequest{Op: op, Topic: req.Topic, Role: req.Role})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.TopicMembers{Mesh: mesh, Topic: req.Topic, Members: nonNil(reply.Members)})
}

// topicsMembers answers GET /v1/topics/members?topic=[&mesh=].
func (s *Server) topicsMembers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	topic, err := topicParam(q.Get("topic"))
	if err != nil {
		writeError(w, err)
		return
	}
	mesh, reply, err := meshAsk[*messages.TopicReply](s, r, q.Get("mesh"), &messages.TopicRequest{Op: messages.TypeTopicMembers, Topic: topic})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.TopicMembers{Mesh: mesh, Topic: topic, Members: nonNil(reply.Members)})
}

// topicsHistory answers GET /v1/topics/history?topic=[&limit=][&before=][&mesh=]:
// newest first, each body decoded.
func (s *Server) topicsHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	topic, err := topicParam(q.Get("topic"))
	if err != nil {
		writeError(w, err)
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 500 {
			writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidTopic,
				Detail: "limit must be a number from 1 to 500, got " + strconv.Quote(v)})
			return
		}
	}
	mesh, reply, err := meshAsk[*messages.TopicReply](s, r, q.Get("mesh"), &messages.TopicRequest{Op: messages.TypeTopicHistory, Topic: topic,
		Limit: limit, BeforeID: q.Get("before")})
	if err != nil {
		writeError(w, err)
		return
	}
	out := &messages.TopicHistory{Mesh: mesh, Topic: topic, Messages: make([]messages.TopicHistoryItem, len(reply.Messages))}
	for i, m := range reply.Messages {
		out.Messages[i].TopicMessage = m
		if body, err := meshcrypto.DecodePlain(m.Ciphertext); err == nil && m.BodyVersion < 2 {
			text := string(body)
			out.Messages[i].Body = &text
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func topicParam(v string) (string, error) {
	v = strings.TrimPrefix(v, "#")
	if v == "" {
		return "", &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidTopic,
			Detail: "name the topic: ?topic=<id or name>"}
	}
	return v, nil
}

// resolveTopic turns the `#name` target of a send into the topic's id
// through the mesh's broker connection (its cache, else a topic_list, else
// — the broker away or silent — the names its topic lists gave, kept in
// outbox.db); the fingerprint keeps the `to` as typed (Destination.Ref). A
// name no topic has is a 404 topic_not_found, one never seen while the
// broker is away a 503 broker_unavailable, and nothing is stored.
func (s *Server) resolveTopic(mesh *Mesh, send *messages.Send) error {
	d := &send.Destination
	if d.Kind != messages.KindTopic || !strings.HasPrefix(d.TargetSpec, "#") {
		return nil
	}
	pid, err := s.meshActor(mesh.Info.Mesh)
	if err != nil {
		return err
	}
	res, err := ask[*messages.TopicResolved](s, pid, &messages.ResolveTopic{Ref: d.Ref})
	var me *messages.Error
	switch {
	case errors.As(err, &me):
		return err
	case err != nil:
		return &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeBrokerUnavailable,
			Detail: fmt.Sprintf("cannot resolve %s to a topic id: the broker of mesh %s did not answer (%v); nothing was stored: "+
				"retry once it is connected, or send to the topic's id (#<id>, from claudemesh topic list)", d.TargetSpec, mesh.Info.Mesh, err)}
	}
	d.TargetSpec = "#" + res.ID
	return nil
}

// inboxTopic turns the topic filter of GET /v1/inbox, when it names a
// topic rather than giving its id, into that topic's id on the meshes the
// listing covers (the request's mesh, else the daemon's own memberships):
// an item keeps the id its push named, so `claudemesh inbox --topic dev`
// matched nothing. *, @group, #… and an id are matched as they are, and so
// is a name no mesh has (a push may have named a topic so). A name two
// meshes give different ids is refused (400, name the mesh); one a broker
// cannot resolve is 503.
func (s *Server) inboxTopic(q *messages.ListInbox) error {
	name := q.Topic
	if name == "" || name == "*" || strings.HasPrefix(name, "@") || strings.HasPrefix(name, "#") || messages.IsTopicID(name) {
		return nil
	}
	slugs := []string{q.Mesh}
	if q.Mesh == "" {
		slugs = s.ownSlugs()
	}
	ids, errs := perMesh(slugs, func(slug string) (string, error) {
		pid, err := s.meshActor(slug)
		if err != nil {
			return "", err
		}
		res, err := ask[*messages.TopicResolved](s, pid, &messages.ResolveTopic{Ref: name})
		if err != nil {
			return "", err
		}
		return res.ID, nil
	})
	var found []string
	var unresolved error
	for i, slug := range slugs {
		var me *messages.Error
		switch {
		case errs[i] == nil:
			if !slices.Contains(found, ids[i]) {
				found = append(found, ids[i])
			}
		case errors.As(errs[i], &me) && me.Code == messages.CodeTopicNotFound:
		case unresolved == nil:
			unresolved = &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeBrokerUnavailable,
				Detail: fmt.Sprintf("cannot resolve topic %q to its id: the broker of mesh %s did not answer (%v); retry once it is "+
					"connected, or filter by the topic's id (claudemesh topic list)", name, slug, errs[i])}
		}
	}
	switch {
	case len(found) == 1:
		q.Topic = found[0]
	case len(found) > 1:
		return &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidQuery,
			Detail: fmt.Sprintf("topic %q is a different topic on each of several meshes (ids %s): name the mesh (mesh=, --mesh)",
				name, strings.Join(found, ", "))}
	case unresolved != nil:
		return unresolved
	}
	return nil
}

// nameTopics fills the TopicName of the topic items whose Topic is an id,
// from what the broker connections know: the item's own (a session's
// connection learns the topics it lists or creates), then, for a session's
// route, its membership's (which lists the topics when it connects). It
// asks no broker; an id no connection knows stays as it is.
func (s *Server) nameTopics(items []messages.InboxItem) {
	known := map[string]map[string]string{} // topic names by the connection asked
	names := func(slug string) map[string]string {
		got, asked := known[slug]
		if !asked {
			if pid, err := s.meshActor(slug); err == nil {
				if res, err := ask[*messages.TopicNamesKnown](s, pid, &messages.TopicNames{}); err == nil {
					got = res.Names
				}
			}
			known[slug] = got
		}
		return got
	}
	for i := range items {
		it := &items[i]
		topic := string(it.Topic)
		if it.Kind != "topic" || !messages.IsTopicID(topic) {
			continue
		}
		it.TopicName = names(it.Mesh)[topic]
		if m := s.served(it.Mesh); it.TopicName == "" && m != nil && m.Parent != "" {
			it.TopicName = names(m.Parent)[topic]
		}
	}
}
