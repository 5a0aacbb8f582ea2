package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/transport/join"
)

// brokerInviteCmd is `broker invite <slug>` (create, the default), `broker
// invite list <slug>` and `broker invite revoke <slug> <id>`.
type brokerInviteCmd struct {
	Create brokerInviteCreateCmd `cmd:"" default:"withargs" help:"Create a signed v1 invite link (the default: broker invite <slug>)."`
	List   brokerInviteListCmd   `cmd:"" help:"List a mesh's invites: id, role, uses left, expiry, state."`
	Revoke brokerInviteRevokeCmd `cmd:"" help:"Revoke an invite: it joins no one from then on."`
}

type brokerInviteCreateCmd struct {
	Slug             string `arg:"" help:"Slug of the mesh to invite to."`
	Uses             int    `default:"1" placeholder:"N" help:"How many members the invite can join (at least 1; default 1)."`
	Expires          string `name:"expires" aliases:"ttl" default:"7d" placeholder:"DURATION" help:"How long the invite stays valid: a Go duration (30m, 24h) or days (7d); default 7d. --ttl is the same flag."`
	Role             string `enum:"member,admin" default:"member" help:"Role the joined members get: member or admin (default member)."`
	BrokerURL        string `name:"broker-url" placeholder:"URL" help:"Base URL joiners reach this broker's HTTP listener at (http or https). The invite signs <URL as ws(s)>/ws as its broker_url and joiners POST <URL>/join; the link printed is <scheme://host>/join/<token>. Default: the URL the broker recorded in its database when it started (broker up --public-url, else the address it listens on)."`
	brokerStoreFlags `embed:""`
	JSON             bool `name:"json" help:"Print the invite as one JSON object instead of the bare link."`
}

// inviteLifetime parses --expires: a Go duration, or a whole number of
// days with a d suffix.
func inviteLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 3650 {
			return 0, fmt.Errorf("--expires %q: days must be a whole number from 1 to 3650", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("--expires %q: want a duration of at least 1s (30m, 24h) or days (7d)", s)
	}
	return d, nil
}

func (c *brokerInviteCreateCmd) Run() error {
	if c.Uses < 1 {
		return &exitError{code: 2, err: errors.New("--uses must be at least 1")}
	}
	ttl, err := inviteLifetime(c.Expires)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, cancel := provisionContext(provisionTimeout)
	defer cancel()
	s, err := c.open(ctx, true, quietLog)
	if err != nil {
		return err
	}
	defer s.Close()
	base, err := c.brokerURL(ctx, s)
	if err != nil {
		return err
	}
	ws, origin, err := join.BrokerURLs(base)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	inv, err := s.CreateInvite(ctx, broker.InviteRequest{MeshSlug: c.Slug, BrokerURL: ws, Role: c.Role, Uses: c.Uses, TTL: ttl})
	switch {
	case errors.Is(err, broker.ErrMeshNotFound):
		return fmt.Errorf("mesh %s not found on this broker; create it with `claudemesh broker mesh create %s`", c.Slug, c.Slug)
	case errors.Is(err, broker.ErrInvalid):
		return &exitError{code: 2, err: err}
	case err != nil:
		return err
	}
	link := join.LinkURL(origin, inv.Token)
	if c.JSON {
		return provisionPrintJSON(map[string]any{"url": link, "id": inv.ID, "mesh_id": inv.MeshID, "mesh_slug": inv.MeshSlug,
			"role": inv.Role, "uses": inv.MaxUses, "expires_at": inv.ExpiresAt, "broker_url": ws,
			"owner_pubkey": inv.Payload.OwnerPubkey})
	}
	uses := "1 use"
	if inv.MaxUses != 1 {
		uses = fmt.Sprintf("%d uses", inv.MaxUses)
	}
	fmt.Fprintf(os.Stderr, "invite %s to mesh %s: %s, role %s, expires %s; join with `claudemesh join <link>` "+
		"(revoke with `claudemesh broker invite revoke %s %s`)\n",
		inv.ID, inv.MeshSlug, uses, inv.Role, stampTime(inv.ExpiresAt), inv.MeshSlug, inv.ID)
	fmt.Println(link)
	return nil
}

// brokerURL is --broker-url, else the public URL the broker recorded when
// it started; it is checked before an invite is signed for nothing.
func (c *brokerInviteCreateCmd) brokerURL(ctx context.Context, s *broker.Store) (string, error) {
	if c.BrokerURL != "" {
		if _, _, err := join.BrokerURLs(c.BrokerURL); err != nil {
			return "", &exitError{code: 2, err: fmt.Errorf("--broker-url: %w", err)}
		}
		return c.BrokerURL, nil
	}
	recorded, at, err := s.Setting(ctx, broker.SettingPublicURL)
	if errors.Is(err, broker.ErrSettingUnset) {
		return "", &exitError{code: 2, err: errors.New("the broker URL is not known: no `claudemesh broker up` has recorded one in this database; " +
			"start the broker (it records its --public-url, else the address it listens on) or pass --broker-url")}
	}
	if err != nil {
		return "", err
	}
	if _, _, err := join.BrokerURLs(recorded); err != nil {
		return "", &exitError{code: 2, err: fmt.Errorf("the broker URL recorded in the database (%s) is not usable: %w; pass --broker-url", recorded, err)}
	}
	fmt.Fprintf(os.Stderr, "broker URL %s, as the broker recorded it when it started (%s); --broker-url overrides it\n",
		recorded, stampTime(at))
	return recorded, nil
}

type brokerInviteListCmd struct {
	Slug             string `arg:"" help:"Slug of the mesh."`
	brokerStoreFlags `embed:""`
	JSON             bool `name:"json" help:"Print the invites as one JSON array."`
}

func (c *brokerInviteListCmd) Run() error {
	return withMesh(&c.brokerStoreFlags, c.Slug, func(ctx context.Context, s *broker.Store, mesh *broker.Mesh) error {
		invites, err := s.Invites(ctx, mesh.Slug)
		if err != nil {
			return err
		}
		now := time.Now()
		if c.JSON {
			out := make([]map[string]any, len(invites))
			for i, inv := range invites {
				out[i] = map[string]any{"id": inv.ID, "role": inv.Role, "max_uses": inv.MaxUses, "uses_left": inv.UsesLeft,
					"expires_at": inv.ExpiresAt, "created_at": inv.CreatedAt, "revoked_at": inv.RevokedAt, "state": inviteState(&inv, now)}
			}
			return provisionPrintJSON(out)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tROLE\tUSES LEFT\tEXPIRES\tSTATE")
		for _, inv := range invites {
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", inv.ID, inv.Role, inv.UsesLeft, inv.MaxUses,
				stampTime(inv.ExpiresAt), inviteState(&inv, now))
		}
		return tw.Flush()
	})
}

// inviteState is what would become of a join with the invite now.
func inviteState(inv *broker.Invite, now time.Time) string {
	switch {
	case inv.RevokedAt != nil:
		return "revoked"
	case !now.Before(inv.ExpiresAt):
		return "expired"
	case inv.UsesLeft == 0:
		return "used up"
	}
	return "active"
}

type brokerInviteRevokeCmd struct {
	Slug             string `arg:"" help:"Slug of the mesh."`
	ID               string `arg:"" name:"id" help:"Id of the invite (broker invite list shows them)."`
	brokerStoreFlags `embed:""`
}

func (c *brokerInviteRevokeCmd) Run() error {
	return withMesh(&c.brokerStoreFlags, c.Slug, func(ctx context.Context, s *broker.Store, mesh *broker.Mesh) error {
		err := s.RevokeInvite(ctx, mesh.Slug, c.ID)
		if errors.Is(err, broker.ErrInviteUnknown) {
			return fmt.Errorf("mesh %s has no invite %s; `claudemesh broker invite list %s` shows them", mesh.Slug, c.ID, mesh.Slug)
		}
		if err != nil {
			return err
		}
		fmt.Printf("revoked invite %s of mesh %s: it joins no one from now on (members it joined stay)\n", c.ID, mesh.Slug)
		return nil
	})
}
