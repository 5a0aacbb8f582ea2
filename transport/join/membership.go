package join

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/claudemesh/claudemesh-go/config"
)

// ErrAlreadyJoined means config.json already records the mesh (same meshId
// or same slug); AddMembership never replaces a recorded key.
var ErrAlreadyJoined = errors.New("mesh already joined")

// AlreadyJoinedError names the membership that is in the way.
type AlreadyJoinedError struct {
	Existing config.Membership
}

func (e *AlreadyJoinedError) Error() string {
	return fmt.Sprintf("%v: config.json already has mesh %q (meshId %s, pubkey %.16s…)",
		ErrAlreadyJoined, e.Existing.Slug, e.Existing.MeshID, e.Existing.Pubkey)
}

func (e *AlreadyJoinedError) Unwrap() error { return ErrAlreadyJoined }

// AddMembership appends m to the meshes of paths' config.json and returns the
// memberships that were there before. Every other key of config.json and
// every field of the other meshes is kept as it was; the file is replaced
// atomically with mode 0600 (the directory is created 0700). A mesh with
// m's meshId or slug already recorded fails with an *AlreadyJoinedError.
//
// This belongs in package config (next to the private saveMemberships);
// it lives here until config exports one.
func AddMembership(paths config.Paths, m config.Membership) ([]config.Membership, error) {
	file := paths.ConfigFile()
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s is not a JSON object: %w", file, err)
		}
	}
	var raws []json.RawMessage
	if raw, ok := doc["meshes"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &raws); err != nil {
			return nil, fmt.Errorf("%s: meshes: %w", file, err)
		}
	}
	before := make([]config.Membership, 0, len(raws))
	for i, raw := range raws {
		var have config.Membership
		if err := json.Unmarshal(raw, &have); err != nil {
			return nil, fmt.Errorf("%s: meshes[%d]: %w", file, i, err)
		}
		if (m.MeshID != "" && have.MeshID == m.MeshID) || have.Slug == m.Slug {
			return nil, &AlreadyJoinedError{Existing: have}
		}
		before = append(before, have)
	}
	added, err := encodeJSON(m, "")
	if err != nil {
		return nil, err
	}
	if doc["meshes"], err = encodeJSON(append(raws, added), ""); err != nil {
		return nil, err
	}
	out, err := encodeJSON(doc, "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(paths.ConfigDir, 0o700); err != nil {
		return nil, fmt.Errorf("create config directory: %w", err)
	}
	if err := config.WriteFileAtomic(file, append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", file, err)
	}
	return before, nil
}

// encodeJSON is json.Marshal without HTML escaping (so the other keys of
// config.json come back byte-for-byte in meaning and form), indented when
// indent is set.
func encodeJSON(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
