package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/join"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Exit codes of a link join refuses before it enrolls anything.
const (
	exitInviteLink      = 10 // none of the link forms, or a short code the host does not know
	exitInviteMalformed = 11 // not base64url JSON, or a field missing or wrong
	exitInviteExpired   = 12
	exitInviteSignature = 13 // changed after signing, or signed by another key
)

type joinCmd struct {
	Link    string        `arg:"" name:"invite-link" help:"Invite link from claudemesh broker invite or the upstream claudemesh: http(s)://host[/<locale>]/join/<token>, https://host/i/<code>, ic://join/<token> or the bare token."`
	Name    string        `placeholder:"NAME" help:"Display name the other members see (1-128 bytes; default: this machine's hostname)."`
	Timeout time.Duration `default:"30s" help:"Give up on the broker after this long."`
	JSON    bool          `name:"json" help:"Print the membership (without the secret key) as one JSON object."`
}

func (c *joinCmd) Run() error {
	ctx, cancel := provisionContext(c.Timeout)
	defer cancel()
	client := &join.Client{}
	inv, err := client.Resolve(ctx, c.Link)
	if err != nil {
		return joinFailure(err)
	}
	name, err := c.displayName()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// Refuse a config.json we could not write back before registering a key.
	if _, err := paths.LoadMemberships(); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("read %s: %w", paths.ConfigFile(), err)}
	}
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		return err
	}
	joined, err := client.Join(ctx, inv, id, name)
	if err != nil {
		return joinFailure(err)
	}
	pub := id.PublicKeyHex()
	before, err := paths.AddMembership(config.Membership{
		MeshID: joined.MeshID, MemberID: joined.MemberID, Slug: joined.Slug, Name: joined.Name,
		Pubkey: pub, SecretKey: id.SecretKeyHex(), BrokerURL: joined.BrokerURL,
		JoinedAt: time.Now().UTC().Format(time.RFC3339), DisplayName: name,
	})
	var dup *config.AlreadyJoinedError
	switch {
	case errors.As(err, &dup):
		return fmt.Errorf("%s already records mesh %s (meshId %s, pubkey %.12s…); not replacing its key. "+
			"The invite registered a new, unused key %.12s… as member %s: the mesh owner may revoke it",
			paths.ConfigFile(), dup.Existing.Slug, dup.Existing.MeshID, dup.Existing.Pubkey, pub, joined.MemberID)
	case err != nil:
		return fmt.Errorf("the broker registered key %.12s… as member %s of mesh %s, but saving it failed (join again with a new invite): %w",
			pub, joined.MemberID, joined.Slug, err)
	}
	return c.report(paths, joined, pub, name, before)
}

// report prints the membership and, when a daemon runs, has it attach the
// new mesh (SIGHUP) and says so.
func (c *joinCmd) report(paths config.Paths, joined *join.Joined, pub, name string, before []config.Membership) error {
	pid, attachErr := attachToRunning(paths, joined.Slug)
	if c.JSON {
		if err := provisionPrintJSON(map[string]any{"mesh_id": joined.MeshID, "member_id": joined.MemberID, "slug": joined.Slug,
			"name": joined.Name, "display_name": name, "role": joined.Role, "pubkey": pub, "broker_url": joined.BrokerURL,
			"config_file": paths.ConfigFile(), "attached_by_daemon": pid != 0 && attachErr == nil}); err != nil {
			return err
		}
		return attachErr
	}
	fmt.Printf("joined mesh %s as %s (key %.12s…, broker %s)\n", joined.Slug, printable(name), pub, joined.BrokerURL)
	if len(before) > 0 {
		beside := fmt.Sprintf("the %d meshes already in config.json", len(before))
		if len(before) == 1 && before[0].Slug == config.LocalMeshSlug && before[0].BrokerURL == "" {
			beside = "the local mesh"
		}
		fmt.Printf("added beside %s\n", beside)
	}
	if pid != 0 && attachErr == nil {
		fmt.Printf("the running daemon (pid %d) serves it\n", pid)
	}
	return attachErr
}

// displayName is --name or the hostname.
func (c *joinCmd) displayName() (string, error) {
	name := strings.TrimSpace(c.Name)
	if name == "" {
		h, err := os.Hostname()
		if h = strings.TrimSpace(h); err != nil || h == "" {
			return "", errors.New("cannot read the hostname; pass --name")
		}
		name = h
		if len(name) > join.MaxDisplayNameBytes {
			name = name[:join.MaxDisplayNameBytes]
		}
	}
	if len(name) > join.MaxDisplayNameBytes {
		return "", fmt.Errorf("--name must be at most %d bytes", join.MaxDisplayNameBytes)
	}
	return name, nil
}

// joinFailure says what went wrong with a link or a join and what to do
// about it.
func joinFailure(err error) error {
	newInvite := "ask the mesh owner for a new invite (`claudemesh broker invite <slug>`)"
	switch {
	case errors.Is(err, join.ErrBadInviteLink), errors.Is(err, join.ErrInviteCodeUnknown):
		return &exitError{code: exitInviteLink, err: fmt.Errorf("join: %w", err)}
	case errors.Is(err, messages.ErrInviteMalformed):
		return &exitError{code: exitInviteMalformed, err: fmt.Errorf("join: %w; check that the link was copied whole", err)}
	case errors.Is(err, messages.ErrInviteExpired):
		return &exitError{code: exitInviteExpired, err: fmt.Errorf("join: %w; %s", err, newInvite)}
	case errors.Is(err, messages.ErrInviteSignature):
		return &exitError{code: exitInviteSignature, err: fmt.Errorf("join: %w: the link was changed after it was signed; "+
			"get it again from the mesh owner", err)}
	case errors.Is(err, join.ErrInviteUsedUp), errors.Is(err, join.ErrInviteRevoked):
		return fmt.Errorf("join failed: %w; %s", err, newInvite)
	case errors.Is(err, join.ErrInviteUnknown):
		return fmt.Errorf("join failed: %w; check that the link was copied whole, or %s", err, newInvite)
	case errors.Is(err, join.ErrNameTaken):
		return fmt.Errorf("join failed: %w; join again with another --name", err)
	case errors.Is(err, join.ErrUnreachable):
		return fmt.Errorf("join failed: %w; check that the broker the invite names is running and reachable", err)
	}
	return fmt.Errorf("join failed: %w", err)
}
