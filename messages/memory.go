package messages

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Memory on the daemon: the IPC routes /v1/memory relay remember, recall
// and forget (memory_frames.go) through a mesh's broker connection.

// MemoryRequest asks a mesh's broker connection (actors.BrokerConn) for
// one memory operation; the reply is *MemoryReply. Op is a request frame
// type: TypeRemember (Content, Tags), TypeRecall (Query, Tags, Limit) or
// TypeForget (ID).
type MemoryRequest struct {
	Op      string
	Content string
	Query   string
	Tags    []string
	Limit   int
	ID      string
}

// MemoryReply is the reply to *MemoryRequest: ID for remember and forget,
// Memories for recall.
type MemoryReply struct {
	ID       string
	Memories []MemoryInfo
	Err      error
}

// Failure returns the request's error, nil on success.
func (r *MemoryReply) Failure() error { return r.Err }

// Memory limits the daemon checks before asking the broker (ours refuses
// the same; upstream's has none).
const (
	MaxMemoryBytes      = 64 << 10
	MaxMemoryTags       = 16
	MaxMemoryTagBytes   = 64
	MaxRecallQueryBytes = 1024
	MaxRecallLimit      = 100
)

// CodeInvalidMemory is the 400 code of a memory request the daemon
// refuses before asking the broker (and of one the broker refused as
// invalid_args).
const CodeInvalidMemory = "invalid_memory"

// MemoryIDLength is the length of a memory's id: 32 letters and digits,
// as a broker mints it (upstream's generateId, and ours).
const MemoryIDLength = 32

// CodeInvalidMemoryID is the 400 code of a forget whose id is not one a
// broker mints.
const CodeInvalidMemoryID = "invalid_memory_id"

// ValidMemoryID reports whether id has the form of a memory's id.
func ValidMemoryID(id string) bool {
	if len(id) != MemoryIDLength {
		return false
	}
	for i := range len(id) {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// ValidateMemoryID refuses an id that is not a memory's (400
// invalid_memory_id): no broker has such a memory, and the id would go
// into its request as it is.
func ValidateMemoryID(id string) error {
	if ValidMemoryID(id) {
		return nil
	}
	shown := id
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return badRequest(CodeInvalidMemoryID, "%q is not a memory id: one is %d letters and digits, as remember and recall print it",
		shown, MemoryIDLength)
}

// RememberRequest is the body of POST /v1/memory.
type RememberRequest struct {
	Content string   `json:"content"`
	Tags    []string `json:"tags,omitempty"`
	Mesh    string   `json:"mesh,omitempty"`
}

// Remembered answers POST /v1/memory.
type Remembered struct {
	ID   string `json:"id"`
	Mesh string `json:"mesh"`
}

// MemoryMatch is one memory of GET /v1/memory, with its mesh.
type MemoryMatch struct {
	MemoryInfo
	Mesh string `json:"mesh"`
}

// MemoryMatches answers GET /v1/memory, best match first.
type MemoryMatches struct {
	Mesh    string        `json:"mesh"`
	Matches []MemoryMatch `json:"matches"`
}

// Forgotten answers DELETE /v1/memory/<id>.
type Forgotten struct {
	OK   bool   `json:"ok"`
	ID   string `json:"id"`
	Mesh string `json:"mesh"`
}

// Validate checks content and tags as the broker would, so that a bad
// request is a 400 here and nothing is sent.
func (r *RememberRequest) Validate() error {
	switch {
	case strings.TrimSpace(r.Content) == "":
		return badRequest(CodeInvalidMemory, "missing 'content' (string): what to remember")
	case len(r.Content) > MaxMemoryBytes:
		return badRequest(CodeInvalidMemory, "content is %d bytes, more than the %d a memory may hold: store a summary, or split it",
			len(r.Content), MaxMemoryBytes)
	case !utf8.ValidString(r.Content):
		return badRequest(CodeInvalidMemory, "content must be UTF-8 text")
	}
	return ValidateMemoryTags(r.Tags)
}

// ValidateMemoryTags checks the tags of a memory or of a recall's filter.
func ValidateMemoryTags(tags []string) error {
	if len(tags) > MaxMemoryTags {
		return badRequest(CodeInvalidMemory, "at most %d tags, got %d", MaxMemoryTags, len(tags))
	}
	for _, t := range tags {
		if t == "" || len(t) > MaxMemoryTagBytes || !utf8.ValidString(t) || strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return badRequest(CodeInvalidMemory, "a tag is 1-%d bytes of text without control characters, got %q", MaxMemoryTagBytes, t)
		}
	}
	return nil
}

// ValidateRecall checks a recall's query and limit (0: the broker's
// default).
func ValidateRecall(query string, limit int) error {
	switch {
	case len(query) > MaxRecallQueryBytes:
		return badRequest(CodeInvalidMemory, "the query is %d bytes, more than %d: use its key words", len(query), MaxRecallQueryBytes)
	case limit < 0 || limit > MaxRecallLimit:
		return badRequest(CodeInvalidMemory, "limit must be 1-%d, got %d", MaxRecallLimit, limit)
	}
	return nil
}

// BrokerTimedOut is the 504 of a request the broker did not answer in
// time (an upstream broker does not answer forget's _reqId, nor requests
// it does not know).
func BrokerTimedOut(mesh, op string, within fmt.Stringer) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Code: CodeBrokerTimeout,
		Detail: fmt.Sprintf("the broker of mesh %s did not answer %s within %s; nothing is known to have changed: retry, "+
			"and check the link with `claudemesh daemon status`", mesh, op, within)}
}
