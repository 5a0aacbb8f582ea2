package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	brokeractors "github.com/claudemesh/claudemesh-go/actors/broker"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

type brokerMemberCmd struct {
	List   brokerMemberListCmd   `cmd:"" help:"List a mesh's active members."`
	Revoke brokerMemberRevokeCmd `cmd:"" help:"Revoke a member: a running broker disconnects it within seconds and refuses its key from then on."`
}

type brokerMemberListCmd struct {
	Slug             string `arg:"" help:"Slug of the mesh."`
	brokerStoreFlags `embed:""`
	JSON             bool `name:"json" help:"Print the members as one JSON array."`
}

func (c *brokerMemberListCmd) Run() error {
	return withMesh(&c.brokerStoreFlags, c.Slug, c.list)
}

func (c *brokerMemberListCmd) list(ctx context.Context, s *broker.Store, mesh *broker.Mesh) error {
	members, err := s.Members(ctx, mesh.ID)
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]map[string]any, len(members))
		for i, m := range members {
			out[i] = map[string]any{"member_id": m.ID, "pubkey": m.Pubkey, "display_name": m.DisplayName, "created_at": m.CreatedAt}
		}
		return provisionPrintJSON(out)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PUBKEY\tNAME\tMEMBER ID\tJOINED")
	for _, m := range members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Pubkey, m.DisplayName, m.ID, m.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

type brokerMemberRevokeCmd struct {
	Slug             string `arg:"" help:"Slug of the mesh."`
	Pubkey           string `arg:"" help:"The member's pubkey (64 hex, as member list shows it)."`
	brokerStoreFlags `embed:""`
	JSON             bool `name:"json" help:"Print the outcome as one JSON object."`
}

func (c *brokerMemberRevokeCmd) Run() error {
	pubkey := strings.ToLower(c.Pubkey)
	if len(pubkey) != 64 || !messages.IsHex(pubkey) {
		return &exitError{code: 2, err: fmt.Errorf("pubkey %q: want 64 hex characters (see `claudemesh broker member list %s`)", c.Pubkey, c.Slug)}
	}
	return withMesh(&c.brokerStoreFlags, c.Slug, func(ctx context.Context, s *broker.Store, mesh *broker.Mesh) error {
		return c.revoke(ctx, s, mesh, pubkey)
	})
}

func (c *brokerMemberRevokeCmd) revoke(ctx context.Context, s *broker.Store, mesh *broker.Mesh, pubkey string) error {
	if err := s.RevokeMember(ctx, mesh.ID, pubkey); errors.Is(err, broker.ErrMemberNotFound) {
		return fmt.Errorf("no member %s in mesh %s (see `claudemesh broker member list %s`)", pubkey, c.Slug, c.Slug)
	} else if err != nil {
		return err
	}
	if c.JSON {
		return provisionPrintJSON(map[string]any{"mesh_slug": mesh.Slug, "mesh_id": mesh.ID, "pubkey": pubkey, "revoked": true})
	}
	fmt.Printf("revoked %s in mesh %s; a running broker disconnects it within %s\n", pubkey, mesh.Slug, brokeractors.RevocationCheck)
	return nil
}

// withMesh opens the broker store, finds the mesh by slug and runs fn,
// within the provisioning timeout.
func withMesh(f *brokerStoreFlags, slug string, fn func(context.Context, *broker.Store, *broker.Mesh) error) error {
	ctx, cancel := provisionContext(provisionTimeout)
	defer cancel()
	s, err := f.open(ctx, true, quietLog)
	if err != nil {
		return err
	}
	defer s.Close()
	mesh, err := s.MeshBySlug(ctx, slug)
	if errors.Is(err, broker.ErrMeshNotFound) {
		return fmt.Errorf("mesh %s not found on this broker", slug)
	} else if err != nil {
		return err
	}
	return fn(ctx, s, mesh)
}
