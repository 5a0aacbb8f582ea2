package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Memory limits.
const (
	// MaxMemoryBytes bounds a memory's content.
	MaxMemoryBytes = 64 << 10
	// MaxMemoryTags bounds the tags of a memory (and of a recall's filter);
	// MaxMemoryTagBytes bounds each.
	MaxMemoryTags     = 16
	MaxMemoryTagBytes = 64
	// MaxRecallQueryBytes bounds a recall's query; only its first
	// MaxRecallTerms words are searched.
	MaxRecallQueryBytes = 1024
	MaxRecallTerms      = 32
	// DefaultRecallLimit and MaxRecallLimit bound a recall's results.
	DefaultRecallLimit = 20
	MaxRecallLimit     = 100
)

// Memory is one memory of a mesh.
type Memory struct {
	ID               string
	MeshID           string
	Content          string
	Tags             []string
	RememberedBy     string // the member's pubkey
	RememberedByName string // its display name when it remembered
	RememberedAt     time.Time
	// Score is a recall's relevance (higher is better; 0 for a recall with
	// no words, which lists the newest). Results with the query's words
	// as an exact phrase come first, then by Score.
	Score float64
}

// NewMemory is what remember asks to store.
type NewMemory struct {
	Content string
	Tags    []string
	Pubkey  string // who remembers it
	Name    string // its display name
}

// RecallQuery is what recall asks for: memories with every word of Query
// (with any of them when none has all), ranked by relevance (the words as
// an exact phrase first), carrying every tag of Tags. A word in more than
// half of the newest 1,000 memories is left out of the match and the rank
// (not of the phrase) unless every word is: "the build failed" asks for
// "build failed". A query with no words lists the newest memories with
// the tags. Query is text: quotes, operators and SQL in it are words or
// separators, never syntax.
type RecallQuery struct {
	Query string
	Tags  []string
	Limit int // 0: DefaultRecallLimit; more than MaxRecallLimit: the maximum
}

// validTags checks tags and returns them without duplicates, in order.
func validTags(tags []string) ([]string, error) {
	if len(tags) > MaxMemoryTags {
		return nil, fmt.Errorf("%w: at most %d tags, got %d", ErrInvalid, MaxMemoryTags, len(tags))
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t == "" || len(t) > MaxMemoryTagBytes || !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("%w: a tag is 1-%d bytes of UTF-8 text without control characters, got %q",
				ErrInvalid, MaxMemoryTagBytes, t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Remember stores a memory of the mesh and returns it. Content empty,
// over MaxMemoryBytes or not UTF-8, and bad tags, wrap ErrInvalid and
// store nothing.
func (s *Store) Remember(ctx context.Context, meshID string, m NewMemory) (*Memory, error) {
	switch {
	case strings.TrimSpace(m.Content) == "":
		return nil, fmt.Errorf("%w: a memory's content is empty", ErrInvalid)
	case len(m.Content) > MaxMemoryBytes:
		return nil, fmt.Errorf("%w: a memory is at most %d bytes, this one is %d: store a summary, or split it",
			ErrInvalid, MaxMemoryBytes, len(m.Content))
	case !utf8.ValidString(m.Content):
		return nil, fmt.Errorf("%w: a memory's content must be UTF-8 text", ErrInvalid)
	}
	tags, err := validTags(m.Tags)
	if err != nil {
		return nil, err
	}
	out := &Memory{ID: newTopicID(), MeshID: meshID, Content: m.Content, Tags: tags, RememberedBy: m.Pubkey,
		RememberedByName: m.Name, RememberedAt: s.clock()}
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO memory (id, mesh_id, content, tags, remembered_by,
		remembered_by_name, remembered_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		out.ID, meshID, out.Content, jsonArray(tags), out.RememberedBy, out.RememberedByName, s.d.time(out.RememberedAt)); err != nil {
		return nil, fmt.Errorf("remember: %w", err)
	}
	return out, nil
}

// Forget deletes the memory of the mesh with id for good and reports
// whether there was one; forgetting it again is a no-op. An id of
// another form than the one Remember mints wraps ErrInvalid.
func (s *Store) Forget(ctx context.Context, meshID, id string) (bool, error) {
	if !messages.ValidMemoryID(id) {
		return false, fmt.Errorf("%w: memoryId must be %d letters and digits, the id remember answered", ErrInvalid,
			messages.MemoryIDLength)
	}
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM memory WHERE mesh_id = ? AND id = ?`), meshID, id)
	if err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
