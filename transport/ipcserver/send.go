package ipcserver

import (
	"fmt"
	"net/http"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// send answers POST /v1/send: validate (phase A; a rejection writes nothing
// and leaves the id free), fingerprint, seal the body once, then one
// AcceptSend to the accept router, which answers after the store committed.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	if s.opts.Pressure != nil && s.opts.Pressure.Level() >= persistence.PressureRefuse {
		writeError(w, &messages.Error{Status: http.StatusInsufficientStorage, Code: messages.CodeInsufficientStorage,
			Detail: "the outbox is under disk pressure ([outbox] max_size_mb, [disk] reserved_mb); nothing was stored: retry later"})
		return
	}
	cmd, send, err := s.decodeSend(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	result, err := ask[*messages.AcceptResult](s, s.opts.Accept, cmd)
	if err != nil {
		writeError(w, err)
		return
	}
	status := acceptStatus[result.Outcome]
	s.metrics.Send.WithLabelValues(cmd.Mesh, destinationKind(send.Destination), status).Inc()
	if result.Outcome != messages.AcceptConflict {
		s.noteContact(cmd.Mesh, send)
	}
	if !result.Inserted && result.Outcome != messages.AcceptConflict {
		s.metrics.Dedupe.WithLabelValues(cmd.Mesh, "out").Inc()
	}
	busy, held := s.recipientBusy(cmd.Mesh, send)
	renderAccept(w, cmd, result, busy, held)
}

// recipientBusy is the status of a DM's recipient when the last peer list
// the daemon has of the mesh shows it working or dnd (peerDirectory.busy),
// and whether the broker holds the message until it is idle (its priority
// is not now); "" for any other send.
func (s *Server) recipientBusy(mesh string, send *messages.Send) (status string, held bool) {
	if send.Destination.Kind != messages.KindDM {
		return "", false
	}
	status = s.names.busy(mesh, send.Destination.TargetSpec, s.opts.now())
	return status, status != "" && send.Priority != "now"
}

// acceptStatus names each accept outcome in cm_daemon_send_total.
var acceptStatus = map[messages.AcceptOutcome]string{messages.AcceptQueued: "queued", messages.AcceptInflight: "inflight",
	messages.AcceptDuplicate: "duplicate", messages.AcceptConflict: "conflict"}

// destinationKind labels a destination in the metrics: dm, topic, group or
// broadcast.
func destinationKind(d messages.Destination) string {
	switch {
	case d.Kind == messages.KindDM:
		return "dm"
	case d.TargetSpec == "*":
		return "broadcast"
	case d.TargetSpec != "" && d.TargetSpec[0] == '@':
		return "group"
	}
	return "topic"
}

// decodeSend reads and validates the body and prepares the accept of the
// send it returns.
func (s *Server) decodeSend(w http.ResponseWriter, r *http.Request) (cmd *messages.AcceptSend, send *messages.Send, err error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	defer bufPool.Put(body)
	keys, hasKey := r.Header["Idempotency-Key"]
	key := ""
	if hasKey {
		key = keys[0]
	}
	send, err = messages.DecodeSend(body.Bytes(), key, hasKey)
	if err != nil {
		return nil, nil, err
	}
	id := send.ClientMessageID
	if id == "" {
		id = ulid.Make().String()
	}
	mesh, err := s.scope(r, send.Mesh)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.Features.Revoked(mesh.Info.Mesh) {
		return nil, nil, &messages.Error{Status: http.StatusForbidden, Code: messages.CodeMemberRevoked,
			Detail: fmt.Sprintf("the broker of mesh %s refuses this daemon's key as revoked, so nothing sent on the mesh can go out: "+
				"the send was not taken; ask the mesh's operator for a new invite (claudemesh join)", mesh.Info.Mesh)}
	}
	if err := s.resolveTopic(mesh, send); err != nil {
		return nil, nil, err
	}
	if err := s.resolveRecipient(mesh, send); err != nil {
		return nil, nil, err
	}
	if err := s.resolveThread(mesh, send); err != nil {
		return nil, nil, err
	}
	cmd, err = prepare(mesh, send, id)
	return cmd, send, err
}

// prepare turns a validated send into the accept command for mesh (a
// membership, or a session's route): it computes the fingerprint, scoped to
// that sender (messages.Fingerprint.Scoped), and builds the frame every
// attempt will send, with a DM body sealed to the recipient by the mesh's
// identity (the session's key on a route).
func prepare(mesh *Mesh, send *messages.Send, clientMessageID string) (*messages.AcceptSend, error) {
	if send.Destination.NamesPeer() {
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidTo,
			Detail: fmt.Sprintf("%q names a peer, which only POST /v1/send resolves: give the 64-hex pubkey", send.Destination.Ref)}
	}
	cmd, err := messages.NewAccept(mesh.Info.Mesh, send, clientMessageID, ulid.Make().String(), now(), mesh.Identity.SendFrame)
	if err != nil {
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidTo, Detail: err.Error()}
	}
	return cmd, nil
}

// renderAccept writes the answer of an accept. The 202, nearly every
// answer, is put together by hand: it is messages.SendAccepted as
// writeJSON would encode it (TestRenderAcceptAsEncoded).
func renderAccept(w http.ResponseWriter, cmd *messages.AcceptSend, r *messages.AcceptResult, busy string, held bool) {
	switch r.Outcome {
	case messages.AcceptQueued, messages.AcceptInflight:
		status := "queued"
		if r.Outcome == messages.AcceptInflight {
			status = "inflight"
		}
		var buf [192]byte
		b := messages.AppendJSONString(append(buf[:0], `{"client_message_id":`...), cmd.ClientMessageID, false)
		b = append(append(append(b, `,"status":"`...), status...), '"')
		if busy != "" { // the recipient_status and held_until_idle of messages.SendAccepted
			b = append(append(append(b, `,"recipient_status":"`...), busy...), '"')
			if held {
				b = append(b, `,"held_until_idle":true`...)
			}
		}
		writeBody(w, http.StatusAccepted, append(b, "}\n"...))
	case messages.AcceptDuplicate:
		writeJSON(w, http.StatusOK, &messages.SendDuplicate{ClientMessageID: cmd.ClientMessageID,
			BrokerMessageID: r.BrokerMessageID, HistoryID: r.HistoryID, Duplicate: true})
	default:
		writeJSON(w, http.StatusConflict, &messages.SendConflict{Error: messages.CodeIdempotencyReused,
			Conflict: r.Conflict, DaemonFingerprintPrefix: cmd.Fingerprint.Prefix(), ClientMessageID: cmd.ClientMessageID,
			BrokerMessageID: r.BrokerMessageID, Reason: r.Reason})
	}
}
