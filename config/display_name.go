package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// HelloName is the display name the daemon announces in this membership's
// hello (wire protocol §1.3; the upstream broker lists the connection
// under it): the name `claudemesh join --name` recorded, else profile
// (config.json's top-level displayName, which the upstream CLI keeps),
// else, for a membership of the embedded broker (registered there under
// its Name, the agent's), that name, else the hostname. Never the name of
// a joined mesh: that is the mesh's, not this member's.
func (m Membership) HelloName(profile string) string {
	switch {
	case m.DisplayName != "":
		return m.DisplayName
	case profile != "":
		return profile
	case m.BrokerURL == "":
		return m.Name
	}
	host, _ := os.Hostname()
	return strings.TrimSpace(host)
}

// ProfileDisplayName reads config.json's top-level displayName, the name
// the upstream CLI's profile gives this user on every mesh ("" when the
// file or the key is missing).
func (p Paths) ProfileDisplayName() (string, error) {
	doc, err := p.readConfigDoc()
	if err != nil {
		return "", err
	}
	raw, ok := doc["displayName"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", fmt.Errorf("%s: displayName must be a string: %w", p.ConfigFile(), err)
	}
	return strings.TrimSpace(name), nil
}
