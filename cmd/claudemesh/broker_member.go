package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

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
	alike := lookalikes(members)
	if c.JSON {
		out := make([]map[string]any, len(members))
		for i, m := range members {
			out[i] = map[string]any{"member_id": m.ID, "pubkey": m.Pubkey, "display_name": m.DisplayName, "created_at": m.CreatedAt}
			if others := alike[m.Pubkey]; len(others) > 0 {
				out[i]["name_lookalikes"] = others
			}
		}
		return provisionPrintJSON(out)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PUBKEY\tNAME\tMEMBER ID\tJOINED")
	for _, m := range members {
		fmt.Fprintf(tw, "%s\t%q\t%s\t%s\n", m.Pubkey, m.DisplayName, m.ID, stampTime(m.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(alike) > 0 {
		fmt.Printf("\nwarning: %d members have names that read the same as another's (joined before names were unique; "+
			"new ones are refused, and `claudemesh send <name>` refuses the ambiguity):\n", len(alike))
		names := make(map[string]string, len(members))
		for _, m := range members {
			names[m.Pubkey] = m.DisplayName
		}
		for _, m := range members {
			if others := alike[m.Pubkey]; len(others) > 0 {
				fmt.Printf("  %+q (%.16s…) reads the same as %s\n", m.DisplayName, m.Pubkey, describeMembers(others, names))
			}
		}
		fmt.Printf("revoke the one that is not who it says with `claudemesh broker member revoke %s <pubkey>`\n", mesh.Slug)
	}
	return nil
}

// lookalikes maps the pubkey of each member whose display name reads the
// same as another's (messages.NameKey) to the pubkeys of those others.
func lookalikes(members []broker.Member) map[string][]string {
	byKey := map[string][]string{}
	for _, m := range members {
		k := messages.NameKey(m.DisplayName)
		byKey[k] = append(byKey[k], m.Pubkey)
	}
	out := map[string][]string{}
	for _, keys := range byKey {
		if len(keys) < 2 {
			continue
		}
		for _, k := range keys {
			for _, other := range keys {
				if other != k {
					out[k] = append(out[k], other)
				}
			}
		}
	}
	return out
}

// describeMembers names members by display name (non-ASCII escaped, so
// that look-alikes differ on screen) and pubkey prefix.
func describeMembers(keys []string, names map[string]string) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%+q (%.16s…)", names[k], k)
	}
	return strings.Join(out, ", ")
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
