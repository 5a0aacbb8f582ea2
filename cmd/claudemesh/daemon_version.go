package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

type daemonVersionCmd struct {
	JSON bool `name:"json" help:"Print one JSON object."`
}

type versionReport struct {
	CLIVersion string            `json:"cli_version"`
	Protocol   string            `json:"protocol"`
	Running    bool              `json:"running"`
	DaemonKind string            `json:"daemon_kind,omitempty"` // ipc.DaemonOurs or ipc.DaemonUpstream
	Daemon     *messages.Version `json:"daemon"`
}

func (c *daemonVersionCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := versionReport{CLIVersion: version, Protocol: ipcserver.Protocol}
	r.Daemon, err = ipc.NewClient(paths.Socket()).Version(ctx)
	switch {
	case errors.Is(err, ipc.ErrDaemonNotRunning):
		r.Daemon = nil
	case err != nil:
		return err
	default:
		d, err := ipc.IdentifyDaemon(r.Daemon)
		if err != nil {
			return err
		}
		r.Running, r.DaemonKind = true, d.Kind
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(&r)
	}
	fmt.Printf("claudemesh %s (protocol %s)\n", r.CLIVersion, r.Protocol)
	if !r.Running {
		fmt.Println("daemon: not running — start it with `claudemesh daemon up`")
		return nil
	}
	d := r.Daemon
	if r.DaemonKind == ipc.DaemonUpstream {
		fmt.Printf("daemon: upstream %s (ipc %s, schema %d)\nipc features: %s\n", d.DaemonVersion, d.IPCAPI, d.SchemaVersion,
			strings.Join(d.IPCFeatures, ", "))
		return nil
	}
	fmt.Printf("daemon: %s (pid %d, ipc %s, schema %d)\n", d.DaemonVersion, d.PID, d.IPCAPI, d.SchemaVersion)
	features := strings.Join(d.BrokerFeaturesNegotiated, ", ")
	if features == "" {
		features = "none"
	}
	fmt.Printf("broker features negotiated: %s\n", features)
	for _, m := range d.Meshes {
		features := strings.Join(m.BrokerFeatures, ", ")
		if features == "" {
			features = "none (not connected)"
		}
		fmt.Printf("mesh %s: member %s; broker features: %s\n", m.Mesh, m.MemberPubkey, features)
	}
	return nil
}
