package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// ErrHostMismatch means the daemon directory was recorded on another host:
// a cloned disk image or a copied home directory would otherwise make two
// daemons share one mesh identity.
var ErrHostMismatch = errors.New("host fingerprint mismatch")

// Host identifies the machine: host_id is /etc/machine-id on Linux
// ("linux:<id>") or the platform UUID on macOS ("darwin:<uuid>"); StableMAC
// is the first universally administered MAC of a physical-looking interface.
// It guards against accidental clones, not attackers.
type Host struct {
	SchemaVersion int    `json:"schema_version"`
	Fingerprint   string `json:"fingerprint"`
	HostID        string `json:"host_id"`
	StableMAC     string `json:"stable_mac"`
	Interface     string `json:"interface"`
	WrittenAt     string `json:"written_at"`
}

const hostSchemaVersion = 2

// HostFile is host_fingerprint.json in the daemon directory.
func (p Paths) HostFile() string { return filepath.Join(p.DaemonDir, "host_fingerprint.json") }

// CurrentHost reads this machine's identity.
func CurrentHost() Host {
	h := Host{SchemaVersion: hostSchemaVersion, HostID: hostID()}
	h.Interface, h.StableMAC = stableMAC()
	sum := sha256.Sum256([]byte("v2\x00" + h.HostID + "\x00" + h.StableMAC))
	h.Fingerprint = hex.EncodeToString(sum[:])
	return h
}

// Matches reports whether the recorded host r is this host c: the same
// non-empty host_id (a MAC change alone is not a clone), else the same
// fingerprint.
func (r Host) Matches(c Host) bool {
	if r.HostID != "" && c.HostID != "" {
		return r.HostID == c.HostID
	}
	return r.Fingerprint == c.Fingerprint
}

// CheckHost compares this host with host_fingerprint.json. The first run
// records it; a match refreshes the MAC if it changed. A mismatch, or a file
// that cannot be read, is ErrHostMismatch with both identities in the text.
func (p Paths) CheckHost() error {
	current := CurrentHost()
	data, err := os.ReadFile(p.HostFile())
	if errors.Is(err, os.ErrNotExist) {
		return p.RecordHost(current)
	}
	if err != nil {
		return err
	}
	var recorded Host
	if err := json.Unmarshal(data, &recorded); err != nil || recorded.SchemaVersion != hostSchemaVersion {
		return fmt.Errorf("%w: %s is unreadable or of another version", ErrHostMismatch, p.HostFile())
	}
	if !recorded.Matches(current) {
		return fmt.Errorf("%w: the daemon directory was set up on host %q (fingerprint %.16s…), this is host %q (fingerprint %.16s…)",
			ErrHostMismatch, recorded.HostID, recorded.Fingerprint, current.HostID, current.Fingerprint)
	}
	if recorded.Fingerprint != current.Fingerprint {
		return p.RecordHost(current)
	}
	return nil
}

// RecordHost writes h as the daemon's host (what `daemon accept-host` does).
func (p Paths) RecordHost(h Host) error {
	h.WrittenAt = time.Now().UTC().Format(time.RFC3339)
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(p.HostFile(), append(data, '\n'), 0o600)
}

func hostID() string {
	switch runtime.GOOS {
	case "linux":
		for _, path := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
			if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
				return "linux:" + string(bytes.TrimSpace(b))
			}
		}
	case "darwin":
		out, err := exec.Command("ioreg", "-rd1", "-c", "IOPlatformExpertDevice").Output()
		if m := platformUUID.FindSubmatch(out); err == nil && m != nil {
			return "darwin:" + string(m[1])
		}
	}
	return ""
}

var (
	platformUUID = regexp.MustCompile(`"IOPlatformUUID" = "([0-9A-Fa-f-]+)"`)
	// virtualIface names interfaces whose MACs come and go: loopback,
	// bridges, container and VPN links.
	virtualIface = regexp.MustCompile(`^(lo|docker|br-|bridge|veth|tap|tun|tailscale|wg|utun|ppp|vboxnet|vmnet|awdl|llw|anpi|ap\d)`)
)

// stableMAC picks, by interface name, the first universally administered
// MAC of a non-virtual interface, falling back to a locally administered one.
func stableMAC() (iface, mac string) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", ""
	}
	sort.Slice(ifaces, func(i, j int) bool { return ifaces[i].Name < ifaces[j].Name })
	var local net.Interface
	for _, ifc := range ifaces {
		if len(ifc.HardwareAddr) != 6 || virtualIface.MatchString(ifc.Name) {
			continue
		}
		if ifc.HardwareAddr[0]&0x02 == 0 {
			return ifc.Name, strings.ToLower(ifc.HardwareAddr.String())
		}
		if local.Name == "" {
			local = ifc
		}
	}
	if local.Name == "" {
		return "", ""
	}
	return local.Name, strings.ToLower(local.HardwareAddr.String())
}
