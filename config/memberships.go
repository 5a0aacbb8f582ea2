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
}

// LoadMemberships reads the meshes of config.json. A missing file means
// none. Keys of config.json other than "meshes" belong to the upstream CLI
// and are left alone.
func (p Paths) LoadMemberships() ([]Membership, error) {
	doc, err := p.readConfigDoc()
	if err != nil {
		return nil, err
	}
	var meshes []Membership
	if raw, ok := doc["meshes"]; ok && !bytes.Equal(raw, []byte("null")) {
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

// EnsureMemberships returns the joined meshes; with none, it mints a fresh
// ed25519 key, records a `local` membership in config.json and returns it.
func (p Paths) EnsureMemberships() ([]Membership, error) {
	meshes, err := p.LoadMemberships()
	if err != nil || len(meshes) > 0 {
		return meshes, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate member key: %w", err)
	}
	local := Membership{
		MeshID: ulid.Make().String(), MemberID: ulid.Make().String(),
		Slug: LocalMeshSlug, Name: LocalMeshSlug,
		Pubkey: hex.EncodeToString(pub), SecretKey: hex.EncodeToString(priv),
		JoinedAt: time.Now().UTC().Format(time.RFC3339),
	}
	if err := p.saveMemberships([]Membership{local}); err != nil {
		return nil, err
	}
	return []Membership{local}, nil
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

func (p Paths) saveMemberships(meshes []Membership) error {
	doc, err := p.readConfigDoc()
	if err != nil {
		return err
	}
	if doc["meshes"], err = json.Marshal(meshes); err != nil {
		return err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.ConfigDir, 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	return WriteFileAtomic(p.ConfigFile(), append(out, '\n'), 0o600)
}
