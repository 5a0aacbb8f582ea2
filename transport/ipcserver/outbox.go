package ipcserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Paging of GET /v1/outbox.
const (
	DefaultOutboxLimit = 50
	MaxOutboxLimit     = 500
)

// outboxList answers GET /v1/outbox?status=&mesh=&limit=&before= (and the
// mail views thread=, awaiting_ack=true&older_than=D: the messages that
// asked for an acknowledgement and have none, enqueued more than D ago),
// newest first, with a Link rel="next" header when more rows exist. status
// "failed" is an alias of "dead". mesh (a membership's slug or a session's
// route) keeps that sender's rows; a session caller sees its own route's
// rows only. ?client_message_id= lists the rows of that id: a
// client_message_id is its sender's own, so without mesh there may be one
// per sender that used it, and all of them are listed, each naming its
// mesh (an operator looking an id up sees every row it names; a caller
// that knows its mesh names it).
func (s *Server) outboxList(w http.ResponseWriter, r *http.Request) {
	q, err := parseOutboxQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if q.Mesh, err = s.listScope(r, q.Mesh); err != nil {
		writeError(w, err)
		return
	}
	q.Frames = q.Thread != ""
	page, err := ask[*messages.OutboxPage](s, s.opts.Store, q)
	if err != nil {
		writeError(w, err)
		return
	}
	s.openSent(page.Items)
	if page.Next != "" {
		next := url.Values{"limit": {strconv.Itoa(q.Limit)}, "before": {page.Next}}
		if q.Status != "" {
			next.Set("status", q.Status)
		}
		if q.Mesh != "" {
			next.Set("mesh", q.Mesh)
		}
		for _, k := range []string{"thread", "awaiting_ack", "older_than"} {
			if x := r.URL.Query().Get(k); x != "" {
				next.Set(k, x)
			}
		}
		w.Header().Set("Link", `</v1/outbox?`+next.Encode()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, page)
}

// listScope is the mesh whose rows a read of the outbox lists: a session
// caller's own route (naming its mesh, its route or nothing), else the
// mesh named, "" for every mesh. A named mesh need not be attached: the
// rows of an agent removed from config.json stay in the outbox.
func (s *Server) listScope(r *http.Request, named string) (string, error) {
	if sessionOf(r) == nil {
		return named, nil
	}
	m, err := s.scope(r, named)
	if err != nil {
		return "", err
	}
	return m.Info.Mesh, nil
}

// validMeshName reports whether s has the form of a membership's slug or
// of a session's route, "<slug>/<session id>".
func validMeshName(s string) bool {
	slug, session, route := strings.Cut(s, "/")
	return messages.ValidSlug(slug) && (!route || messages.ValidClientMessageID(session))
}

func parseOutboxQuery(v url.Values) (*messages.ListOutbox, error) {
	q := &messages.ListOutbox{Status: v.Get("status"), Mesh: v.Get("mesh"), Limit: DefaultOutboxLimit, Before: v.Get("before"),
		ClientMessageID: v.Get("client_message_id"), Thread: v.Get("thread"), ID: v.Get("id")}
	if err := parseAwaitingAck(v, q); err != nil {
		return nil, err
	}
	if q.Thread != "" && !messages.ValidClientMessageID(q.Thread) {
		return nil, invalidQuery("thread must be a thread id (1-128 printable ASCII characters, no spaces)")
	}
	if q.ClientMessageID != "" && !messages.ValidClientMessageID(q.ClientMessageID) {
		return nil, invalidQuery("client_message_id is not a valid id")
	}
	if q.Mesh != "" && !validMeshName(q.Mesh) {
		return nil, invalidQuery("mesh must be a mesh's slug or a session's route (<mesh>/<session id>)")
	}
	switch q.Status {
	case "", messages.StatusPending, messages.StatusInflight, messages.StatusDone, messages.StatusDead, messages.StatusAborted:
	case "failed":
		q.Status = messages.StatusDead
	default:
		return nil, invalidQuery("status must be pending, inflight, done, dead (or failed) or aborted")
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxOutboxLimit {
			return nil, invalidQuery("limit must be an integer from 1 to " + strconv.Itoa(MaxOutboxLimit))
		}
		q.Limit = n
	}
	if q.Before != "" {
		if _, err := ulid.ParseStrict(q.Before); err != nil {
			return nil, invalidQuery("before must be a row id from a previous page")
		}
	}
	if q.ID != "" {
		if _, err := ulid.ParseStrict(q.ID); err != nil {
			return nil, invalidQuery("id must be an outbox row id (the id column of outbox list)")
		}
	}
	return q, nil
}

// parseAwaitingAck reads awaiting_ack=true and older_than=<duration> (the
// rows enqueued more than that long ago; only with awaiting_ack).
func parseAwaitingAck(v url.Values, q *messages.ListOutbox) error {
	var err error
	if q.AwaitingAck, err = boolQuery(v, "awaiting_ack", false); err != nil {
		return err
	}
	older := v.Get("older_than")
	if older == "" {
		return nil
	}
	d, err := time.ParseDuration(older)
	switch {
	case !q.AwaitingAck:
		return invalidQuery("older_than goes with awaiting_ack=true")
	case err != nil || d < 0:
		return invalidQuery("older_than must be a duration such as 10m")
	}
	q.EnqueuedBefore = time.Now().Add(-d).UnixMilli()
	return nil
}

// openSent sets each row's Body from its Frame, which it drops: a direct
// message opened with the key of the route that sent it (crypto_box's key
// is the same both ways), anything else decoded from base64. A row whose
// route is no longer served, or whose frame does not open, gets none.
func (s *Server) openSent(items []messages.OutboxItem) {
	for i := range items {
		it := &items[i]
		frame := it.Frame
		it.Frame = nil
		var f messages.SendFrame
		if len(frame) == 0 || json.Unmarshal(frame, &f) != nil {
			continue
		}
		var body []byte
		var err error
		if dest, derr := messages.ParseDestination(f.TargetSpec); derr == nil && dest.Kind == messages.KindDM {
			mesh := s.served(it.Mesh)
			if mesh == nil || mesh.Identity == nil {
				continue
			}
			body, err = mesh.Identity.OpenDM(dest.Ref, f.Nonce, f.Ciphertext)
		} else {
			body, err = meshcrypto.DecodePlain(f.Ciphertext)
		}
		if err == nil {
			text := string(body)
			it.Body = &text
		}
	}
}

// outboxRequeue answers POST /v1/outbox/requeue (spec §4.7).
func (s *Server) outboxRequeue(w http.ResponseWriter, r *http.Request) {
	cmd, err := s.decodeRequeue(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	result, err := ask[*messages.RequeueResult](s, s.opts.Store, cmd)
	if err != nil {
		writeError(w, err)
		return
	}
	s.opts.Log.Info("outbox_requeued", "aborted_row_id", result.AbortedRowID, "new_row_id", result.NewRowID,
		"client_message_id", result.NewClientMessageID)
	writeJSON(w, http.StatusOK, result)
}

// outboxDrop answers POST /v1/outbox/drop {id}: the row (dead or pending)
// is given up — aborted by the operator, no successor.
func (s *Server) outboxDrop(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer bufPool.Put(body)
	var req messages.DropRequest
	if err := messages.DecodeJSON(body.Bytes(), &req); err != nil {
		writeError(w, err)
		return
	}
	if req.ID == "" {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: "missing_id", Detail: "id (the outbox row id) is required"})
		return
	}
	result, err := ask[*messages.DropResult](s, s.opts.Store, &messages.DropOutbox{ID: req.ID, Scope: sessionRoute(r), Now: now()})
	if err != nil {
		writeError(w, err)
		return
	}
	s.opts.Log.Info("outbox_dropped", "row_id", result.AbortedRowID, "client_message_id", result.ClientMessageID)
	writeJSON(w, http.StatusOK, result)
}

func (s *Server) decodeRequeue(w http.ResponseWriter, r *http.Request) (*messages.RequeueOutbox, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	defer bufPool.Put(body)
	var req messages.RequeueRequest
	if err := messages.DecodeJSON(body.Bytes(), &req); err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: "missing_id", Detail: "id (the outbox row id) is required"}
	}
	newID := req.NewClientMessageID
	var patch *messages.Send
	if req.Patch != nil {
		if patch, err = req.Patch.Validate(); err != nil {
			return nil, err
		}
		if newID != "" && patch.ClientMessageID != "" && patch.ClientMessageID != newID {
			return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeIdempotencyKeyDiffer,
				Detail: "new_client_message_id and the patch's client_message_id differ"}
		}
		if newID == "" {
			newID = patch.ClientMessageID
		}
	}
	if newID == "" {
		newID = ulid.Make().String()
	} else if !messages.ValidClientMessageID(newID) {
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidClientID,
			Detail: "new_client_message_id must be 1-128 printable ASCII characters without spaces"}
	}
	cmd := &messages.RequeueOutbox{ID: req.ID, Scope: sessionRoute(r), NewRowID: ulid.Make().String(),
		NewClientMessageID: newID, Now: now()}
	if patch != nil {
		mesh, err := s.scope(r, patch.Mesh)
		if err != nil {
			return nil, err
		}
		prepared, err := prepare(mesh, patch, newID)
		if err != nil {
			return nil, err
		}
		cmd.Replacement = &messages.Replacement{Mesh: prepared.Mesh, Fingerprint: prepared.Fingerprint, Payload: prepared.Payload,
			Mail: prepared.Mail}
	}
	return cmd, nil
}
