package join

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Handler serves POST /join against store. Mount it at Path (after
// stripping any base path the broker runs under); it answers another
// method with 405.
func Handler(store *broker.Store, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{store: store, log: log}
}

type handler struct {
	store *broker.Store
	log   *slog.Logger
}

// refusal is an answer other than 200.
type refusal struct {
	status       int
	code, detail string
}

func (r *refusal) Error() string { return r.code + ": " + r.detail }

func refuse(code, detail string) *refusal {
	return &refusal{status: http.StatusBadRequest, code: code, detail: detail}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, Response{Error: CodeMethod, Detail: "use POST " + Path})
		return
	}
	resp, err := h.join(w, r)
	if err != nil {
		rf, ok := errors.AsType[*refusal](err)
		if !ok {
			// The store's errors carry no token (it keeps only hashes).
			h.log.Error("join_failed", "err", err)
			rf = &refusal{status: http.StatusInternalServerError, code: CodeInternal, detail: "the broker could not enroll the key; retry later"}
		} else {
			h.log.Info("join_refused", "error", rf.code)
		}
		writeJSON(w, rf.status, Response{Error: rf.code, Detail: rf.detail})
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// join decodes and checks the request, then redeems the invite.
func (h *handler) join(w http.ResponseWriter, r *http.Request) (*Response, error) {
	req, err := decodeRequest(w, r)
	if err != nil {
		return nil, err
	}
	token, err := messages.DecodeInviteToken(req.InviteToken)
	if err != nil {
		return nil, refuse(CodeMalformed, err.Error())
	}
	sent, err := messages.DecodeInvitePayload(req.InvitePayload)
	if err != nil || *sent != *token {
		return nil, refuse(CodePayloadMismatch, "invite_payload must be the payload invite_token encodes")
	}
	red, err := h.store.RedeemInvite(r.Context(), req.InviteToken, req.PeerPubkey, req.DisplayName)
	if err != nil {
		return nil, redeemRefusal(err)
	}
	h.log.Info("member_joined", "mesh", red.Mesh.Slug, "member_id", red.Member.ID,
		"pubkey_prefix", red.Member.Pubkey[:16], "already_member", red.AlreadyMember)
	return &Response{OK: true, MemberID: red.Member.ID, AlreadyMember: red.AlreadyMember}, nil
}

// redeemRefusal names the store's refusals; anything else is the
// broker's failure.
func redeemRefusal(err error) error {
	if taken, ok := errors.AsType[*broker.NameTakenError](err); ok {
		return refuse(CodeNameTaken, taken.Error()+" (the invite was not used)")
	}
	for _, c := range []struct {
		err          error
		code, detail string
	}{
		{messages.ErrInviteSignature, CodeBadSignature, "the invite's signature does not verify: the link was changed; ask for a new one"},
		{messages.ErrInviteMalformed, CodeMalformed, "the invite token is not a v1 invite"},
		{broker.ErrInviteUnknown, CodeNotFound, "this broker did not issue this invite; check that the link was copied whole"},
		{broker.ErrInviteOwnerMismatch, CodeOwnerMismatch, "the invite is not signed by this mesh's owner key; ask for a new one"},
		{broker.ErrInviteRevoked, CodeRevoked, "the invite was revoked; ask the mesh owner for a new one"},
		{broker.ErrInviteExpired, CodeExpired, "the invite has expired; ask the mesh owner for a new one"},
		{broker.ErrInviteUsedUp, CodeExhausted, "the invite has no uses left; ask the mesh owner for a new one"},
		{broker.ErrMemberRevoked, CodeMemberRevoked, "this key was revoked from the mesh; join with a new key"},
		{broker.ErrInvalid, CodeInvalidName, err.Error()},
	} {
		if errors.Is(err, c.err) {
			return refuse(c.code, c.detail)
		}
	}
	return err
}

var hexPubkey = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// decodeRequest reads at most MaxRequestBytes, decodes one JSON object and
// checks its fields as upstream does, and the display name as our store
// will.
func decodeRequest(w http.ResponseWriter, r *http.Request) (*Request, error) {
	tooLarge := &refusal{status: http.StatusRequestEntityTooLarge, code: CodeTooLarge,
		detail: "the request body exceeds " + strconv.Itoa(MaxRequestBytes) + " bytes"}
	if r.ContentLength > MaxRequestBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	switch _, isMax := errors.AsType[*http.MaxBytesError](err); {
	case isMax:
		return nil, tooLarge
	case err != nil:
		return nil, refuse(CodeInvalidJSON, "reading the body: "+err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var req Request
	if err := dec.Decode(&req); err != nil {
		return nil, refuse(CodeInvalidJSON, "the body must be one JSON object: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refuse(CodeInvalidJSON, "trailing data after the JSON object")
	}
	if req.InviteToken == "" || req.PeerPubkey == "" || req.DisplayName == "" || !isObject(req.InvitePayload) {
		return nil, refuse(CodeRequired, "invite_payload is the token's payload as a JSON object")
	}
	if !hexPubkey.MatchString(req.PeerPubkey) {
		return nil, refuse(CodeInvalidPubkey, "the member key being enrolled, ed25519")
	}
	if name := strings.TrimSpace(req.DisplayName); name == "" || len(name) > MaxDisplayNameBytes || !utf8.ValidString(name) {
		return nil, refuse(CodeInvalidName, "display_name must be 1-"+strconv.Itoa(MaxDisplayNameBytes)+" bytes of UTF-8")
	}
	return &req, nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// writeJSON renders v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"ok":false,"error":"internal","detail":"the answer could not be encoded"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
