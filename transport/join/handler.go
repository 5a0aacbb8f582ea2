package join

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Handler serves POST /join/{token} against store. Mount it at "/join/"
// (after stripping any base path the broker runs under); it answers every
// other path with a 404 envelope and every other method with 405.
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

// apiError is an answer other than 200.
type apiError struct {
	status int
	body   ErrorBody
}

func (e *apiError) Error() string { return e.body.Error + ": " + e.body.Detail }

func fail(status int, code, detail string) *apiError {
	return &apiError{status: status, body: ErrorBody{Error: code, Detail: detail}}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok || token == "" || strings.Contains(token, "/") {
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: CodeNotFound, Detail: "POST /join/<token>"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: CodeMethodNotAllowed, Detail: "use POST"})
		return
	}
	resp, err := h.join(r.Context(), w, r, token)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			// The store's errors carry no token (it keeps only hashes).
			h.log.Error("join_failed", "err", err)
			ae = fail(http.StatusInternalServerError, CodeInternal, "the broker could not redeem the invite; retry later")
		}
		writeJSON(w, ae.status, ae.body)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// join decodes and checks the request, then redeems the invite.
func (h *handler) join(ctx context.Context, w http.ResponseWriter, r *http.Request, token string) (*Response, error) {
	req, err := decodeRequest(w, r)
	if err != nil {
		return nil, err
	}
	if err := req.verify(token); err != nil {
		return nil, err
	}
	if !validToken(token) {
		return nil, fail(http.StatusNotFound, CodeInviteUnknown, "no such invite on this broker")
	}
	member, mesh, err := h.store.RedeemInvite(ctx, token, req.Pubkey, req.DisplayName)
	switch {
	case errors.Is(err, broker.ErrInviteUnknown):
		return nil, fail(http.StatusNotFound, CodeInviteUnknown, "no such invite on this broker")
	case errors.Is(err, broker.ErrInviteExpired):
		return nil, fail(http.StatusGone, CodeInviteExpired, "the invite has expired; ask the mesh owner for a new one")
	case errors.Is(err, broker.ErrInviteUsedUp):
		return nil, fail(http.StatusGone, CodeInviteUsedUp, "the invite has no uses left; ask the mesh owner for a new one")
	case errors.Is(err, broker.ErrMemberRevoked):
		return nil, fail(http.StatusForbidden, CodeMemberRevoked, "this key was revoked from the mesh; join with a new key")
	case errors.Is(err, broker.ErrInvalid):
		return nil, fail(http.StatusBadRequest, CodeInvalidRequest, err.Error())
	case err != nil:
		return nil, err
	}
	h.log.Info("member_joined", "mesh", mesh.Slug, "member_id", member.ID, "pubkey_prefix", member.Pubkey[:16])
	return &Response{MeshID: mesh.ID, MemberID: member.ID, Slug: mesh.Slug, Name: mesh.Slug,
		DisplayName: member.DisplayName}, nil
}

// decodeRequest reads at most MaxRequestBytes and decodes exactly one JSON
// object with no unknown fields.
func decodeRequest(w http.ResponseWriter, r *http.Request) (*Request, error) {
	tooLarge := fail(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
		"the request body exceeds "+strconv.Itoa(MaxRequestBytes)+" bytes")
	if r.ContentLength > MaxRequestBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, fail(http.StatusBadRequest, CodeInvalidJSON, "reading the body: "+err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return nil, fail(http.StatusBadRequest, CodeInvalidJSON, err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail(http.StatusBadRequest, CodeInvalidJSON, "trailing data after the JSON object")
	}
	return &req, nil
}

// verify checks the fields and that the signature over the token and pubkey
// verifies under that pubkey.
func (req *Request) verify(token string) error {
	pub, err := meshcrypto.ParsePublicKey(req.Pubkey)
	if err != nil {
		return fail(http.StatusBadRequest, CodeInvalidPubkey, "pubkey must be a valid ed25519 public key in 64 hex characters")
	}
	req.DisplayName = strings.TrimSpace(req.DisplayName)
	if req.DisplayName == "" || len(req.DisplayName) > MaxDisplayNameBytes || !utf8.ValidString(req.DisplayName) {
		return fail(http.StatusBadRequest, CodeInvalidDisplayName,
			"display_name must be 1-"+strconv.Itoa(MaxDisplayNameBytes)+" bytes of UTF-8")
	}
	sig, err := hex.DecodeString(req.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fail(http.StatusBadRequest, CodeBadSignature, "signature must be 128 hex characters")
	}
	if !ed25519.Verify(pub, SignatureMessage(token, req.Pubkey), sig) {
		return fail(http.StatusBadRequest, CodeBadSignature,
			"signature does not verify: sign claudemesh-join|<token>|<pubkey> with the key being registered")
	}
	return nil
}

// writeJSON renders v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal","detail":"response could not be encoded"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
