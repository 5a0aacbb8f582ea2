package config

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
)

// LocalMeshSlug names the membership `daemon up` creates when config.json
// has none, so that the daemon always has an identity.
const LocalMeshSlug = "local"

// Membership is one joined mesh as the upstream CLI writes it in
// config.json. SecretKey is 128 hex: the ed25519 seed followed by the public
// key. An empty BrokerURL means the daemon's embedded loopback broker.
type Membership struct {
	MeshID    string `json:"meshId"`
	MemberID  string `json:"memberId"`
	Slug      string `json:"slug"`
	Name      string `json:"name"`
	Pubkey    string `json:"pubkey"`
	SecretKey string `json:"secretKey"`
	BrokerURL string `json:"brokerUrl"`
	JoinedAt  string `json:"joinedAt,omitempty"`
	// DisplayName is the name `claudemesh join --name` registered (not
	// the mesh's: that is Name); see HelloName.
	DisplayName string `json:"displayName,omitempty"`
}

// LocalAgent reports whether m is another agent's identity on the local
// mesh (`daemon add-agent`: no brokerUrl, and not LocalMeshSlug itself),
// which a request that names no mesh never acts as.
func (m Membership) LocalAgent() bool { return m.BrokerURL == "" && m.Slug != LocalMeshSlug }

// LoadMemberships reads the meshes of config.json. A missing file means
// none. Keys of config.json other than "meshes" belong to the upstream CLI
// and are left alone.
func (p Paths) LoadMemberships() ([]Membership, error) {
	doc, err := p.readConfigDoc()
	if err != nil {
		return nil, err
	}
	var meshes []Membership
	if raw, ok := doc["meshes"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &meshes); err != nil {
			return nil, fmt.Errorf("%s: meshes: %w", p.ConfigFile(), err)
		}
	}
	for i, m := range meshes {
		if m.Slug == "" || m.Pubkey == "" || m.SecretKey == "" {
			return nil, fmt.Errorf("%s: meshes[%d] lacks slug, pubkey or secretKey", p.ConfigFile(), i)
		}
	}
	return meshes, nil
}

// EnsureMemberships returns the joined meshes; with none, it records a
// fresh `local` membership on the embedded broker (NewMembership) in
// config.json and returns it.
func (p Paths) EnsureMemberships() ([]Membership, error) {
	meshes, err := p.LoadMemberships()
	if err != nil || len(meshes) > 0 {
		return meshes, err
	}
	local, err := NewMembership(LocalMeshSlug, "")
	if err != nil {
		return nil, err
	}
	if _, err := p.AddMembership(local); err != nil {
		return nil, err
	}
	return []Membership{local}, nil
}

// NewMembership mints a membership of its own: a fresh ed25519 key and new
// mesh and member ids, named slug, on the broker at brokerURL (empty: the
// embedded one). It records nothing; AddMembership does.
func NewMembership(slug, brokerURL string) (Membership, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Membership{}, fmt.Errorf("generate member key: %w", err)
	}
	return Membership{
		MeshID: ulid.Make().String(), MemberID: ulid.Make().String(),
		Slug: slug, Name: slug,
		Pubkey: hex.EncodeToString(pub), SecretKey: hex.EncodeToString(priv),
		BrokerURL: brokerURL, JoinedAt: time.Now().UTC().Format(time.RFC3339),
	}, nil
}

// NewLocalAgent mints another member of the embedded broker's mesh (the
// membership named LocalMeshSlug, which has no brokerUrl), named slug: a
// second agent on this machine gets an identity of its own, so that it and
// the first can message each other through the daemon. It records nothing;
// AddMembership does.
func NewLocalAgent(slug string, have []Membership) (Membership, error) {
	if !messages.ValidSlug(slug) {
		return Membership{}, fmt.Errorf("agent name %q: want 1-64 of a-z, 0-9, _ and -, starting with a letter or digit", slug)
	}
	for _, m := range have {
		if m.Slug == LocalMeshSlug && m.BrokerURL == "" {
			a, err := NewMembership(slug, "")
			a.MeshID = m.MeshID
			return a, err
		}
	}
	return Membership{}, fmt.Errorf("config.json has no %q mesh of the embedded broker to add an agent to (start the daemon once to create it)", LocalMeshSlug)
}

func (p Paths) readConfigDoc() (map[string]json.RawMessage, error) {
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(p.ConfigFile())
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %w", p.ConfigFile(), err)
	}
	return doc, nil
}

// ErrAlreadyJoined means config.json already records the mesh (same meshId
// or same slug); AddMembership never replaces a recorded key.
var ErrAlreadyJoined = errors.New("mesh already joined")

// AlreadyJoinedError names the membership that is in the way.
type AlreadyJoinedError struct {
	Existing Membership
}

func (e *AlreadyJoinedError) Error() string {
	return fmt.Sprintf("%v: config.json already has mesh %q (meshId %s, pubkey %.16s…)",
		ErrAlreadyJoined, e.Existing.Slug, e.Existing.MeshID, e.Existing.Pubkey)
}

func (e *AlreadyJoinedError) Unwrap() error { return ErrAlreadyJoined }

// AddMembership appends m to the meshes of config.json and returns the
// memberships that were there before. Every other key of config.json and
// every field of the other meshes is kept as it was; the file is replaced
// atomically with mode 0600 (the directory is created 0700). A mesh with
// m's meshId or slug already recorded fails with an *AlreadyJoinedError —
// except that memberships of the embedded broker's mesh (no brokerUrl) may
// share a meshId: those are the agents of this machine (NewLocalAgent).
func (p Paths) AddMembership(m Membership) ([]Membership, error) {
	file := p.ConfigFile()
	doc, err := p.readConfigDoc()
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if raw, ok := doc["meshes"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &raws); err != nil {
			return nil, fmt.Errorf("%s: meshes: %w", file, err)
		}
	}
	before := make([]Membership, 0, len(raws))
	for i, raw := range raws {
		var have Membership
		if err := json.Unmarshal(raw, &have); err != nil {
			return nil, fmt.Errorf("%s: meshes[%d]: %w", file, i, err)
		}
		sameMesh := m.MeshID != "" && have.MeshID == m.MeshID && (m.BrokerURL != "" || have.BrokerURL != "")
		if sameMesh || have.Slug == m.Slug {
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
	if err := os.MkdirAll(p.ConfigDir, 0o700); err != nil {
		return nil, fmt.Errorf("create config directory: %w", err)
	}
	if err := WriteFileAtomic(file, append(out, '\n'), 0o600); err != nil {
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
