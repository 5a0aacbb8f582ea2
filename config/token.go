package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// EnsureLocalToken returns the daemon's bearer token for TCP clients,
// creating local-token (32 CSPRNG bytes, unpadded base64url, a newline, mode
// 0600) the first time. An existing token is never replaced.
func (p Paths) EnsureLocalToken() (string, error) {
	tok, err := p.ReadLocalToken()
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return p.RotateLocalToken()
}

// RotateLocalToken replaces local-token with a new one, atomically (a
// reader sees the old file or the new, whole), and returns it.
func (p Paths) RotateLocalToken() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate local token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	if err := WriteFileAtomic(p.TokenFile(), []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", p.TokenFile(), err)
	}
	return tok, nil
}

// ReadLocalToken reads local-token, trimmed. An empty file is an error.
func (p Paths) ReadLocalToken() (string, error) {
	b, err := os.ReadFile(p.TokenFile())
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty; delete it and restart the daemon to mint a new one", p.TokenFile())
	}
	return tok, nil
}
