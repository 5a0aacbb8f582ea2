package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/transport/join"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// provisionTimeout bounds one provisioning command (opening the store
// included).
const provisionTimeout = 30 * time.Second

// brokerStoreFlags say which broker database a command opens: `broker up`
// serves it, the provisioning commands write to it.
type brokerStoreFlags struct {
	Dir         string `type:"path" xor:"store" placeholder:"DIR" help:"Broker data directory holding broker.db (SQLite). Default: ~/.claudemesh/broker, created 0700."`
	DatabaseURL string `name:"database-url" env:"CLAUDEMESH_DATABASE_URL" xor:"store" placeholder:"URL" help:"PostgreSQL connection URL (postgres://…) of the broker's database, instead of SQLite."`
}

// open opens the broker store. With mustExist, a SQLite directory without a
// broker.db is an error rather than a fresh empty database.
func (f *brokerStoreFlags) open(ctx context.Context, mustExist bool, log *slog.Logger) (*broker.Store, error) {
	opts := broker.Options{Dir: f.Dir, DatabaseURL: f.DatabaseURL, Log: log}
	if opts.DatabaseURL == "" && opts.Dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("find home directory (pass --dir): %w", err)}
		}
		opts.Dir = filepath.Join(home, ".claudemesh", "broker")
	}
	if opts.Dir != "" && mustExist {
		if _, err := os.Stat(filepath.Join(opts.Dir, broker.FileName)); errors.Is(err, os.ErrNotExist) {
			return nil, &exitError{code: 2, err: fmt.Errorf("no broker database in %s; create a mesh first with `claudemesh broker mesh create <slug> --dir %s`", opts.Dir, opts.Dir)}
		}
	}
	s, err := broker.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("open broker store: %w", err)
	}
	return s, nil
}

// provisionContext is cancelled by SIGINT/SIGTERM and after timeout.
func provisionContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

// quietLog drops the store's informational logs in provisioning commands.
var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func provisionPrintJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

type brokerMeshCreateCmd struct {
	Slug             string `arg:"" help:"Mesh slug: 1-64 of a-z, 0-9, _ and -, starting with a letter or digit."`
	brokerStoreFlags `embed:""`
	RetentionDays    int  `name:"retention-days" placeholder:"N" help:"Days the broker remembers a client_message_id for dedupe (at least 3; default 365)."`
	PermanentDedupe  bool `name:"permanent-dedupe" help:"Remember every client_message_id forever instead of for --retention-days."`
	JSON             bool `name:"json" help:"Print the created mesh as one JSON object."`
}

func (c *brokerMeshCreateCmd) Run() error {
	m := broker.Mesh{Slug: c.Slug, DedupeRetentionDays: c.RetentionDays}
	switch {
	case c.PermanentDedupe && c.RetentionDays != 0:
		return &exitError{code: 2, err: errors.New("--retention-days does not apply with --permanent-dedupe; pass one of them")}
	case c.RetentionDays < 0:
		return &exitError{code: 2, err: fmt.Errorf("--retention-days must be at least %d", broker.MinDedupeRetentionDays)}
	case c.PermanentDedupe:
		m.DedupeMode = broker.DedupePermanent
	}
	ctx, cancel := provisionContext(provisionTimeout)
	defer cancel()
	s, err := c.open(ctx, false, quietLog)
	if err != nil {
		return err
	}
	defer s.Close()
	mesh, err := s.CreateMesh(ctx, m)
	switch {
	case errors.Is(err, broker.ErrInvalid):
		return &exitError{code: 2, err: err}
	case errors.Is(err, broker.ErrMeshExists):
		return fmt.Errorf("mesh %s already exists on this broker; invite members with `claudemesh broker invite %s`", c.Slug, c.Slug)
	case err != nil:
		return err
	}
	if c.JSON {
		return provisionPrintJSON(map[string]any{"id": mesh.ID, "slug": mesh.Slug, "created_at": mesh.CreatedAt,
			"dedupe_mode": mesh.DedupeMode, "dedupe_retention_days": mesh.DedupeRetentionDays,
			"max_payload_bytes": mesh.MaxPayloadBytes, "backend": s.Backend()})
	}
	fmt.Printf("created mesh %s (id %s)\n", mesh.Slug, mesh.ID)
	return nil
}

type brokerInviteCmd struct {
	Slug             string        `arg:"" help:"Slug of the mesh to invite to."`
	Uses             int           `default:"1" placeholder:"N" help:"How many members the invite can join (at least 1; default 1)."`
	TTL              time.Duration `name:"ttl" default:"24h" placeholder:"DURATION" help:"How long the invite stays valid (Go duration: 30m, 24h, 168h; default 24h)."`
	BrokerURL        string        `name:"broker-url" placeholder:"URL" help:"Base URL joiners reach this broker's HTTP listener at (http or https); the invite is <URL>/join/<token>, the WebSocket <URL as ws(s)>/ws. Default: the URL the broker recorded in its database when it started (broker up --public-url, else the address it listens on)."`
	brokerStoreFlags `embed:""`
	JSON             bool `name:"json" help:"Print the invite as one JSON object instead of the bare URL."`
}

func (c *brokerInviteCmd) Run() error {
	if c.Uses < 1 {
		return &exitError{code: 2, err: errors.New("--uses must be at least 1")}
	}
	if c.TTL <= 0 {
		return &exitError{code: 2, err: errors.New("--ttl must be positive")}
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
	inv, err := s.CreateInvite(ctx, c.Slug, c.Uses, c.TTL)
	switch {
	case errors.Is(err, broker.ErrMeshNotFound):
		return fmt.Errorf("mesh %s not found on this broker; create it with `claudemesh broker mesh create %s`", c.Slug, c.Slug)
	case errors.Is(err, broker.ErrInvalid):
		return &exitError{code: 2, err: err}
	case err != nil:
		return err
	}
	inviteURL, err := join.InviteURL(base, inv.Token)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--broker-url: %w", err)}
	}
	parsed, err := join.ParseInviteURL(inviteURL)
	if err != nil {
		return fmt.Errorf("the invite URL does not parse back: %w", err)
	}
	if c.JSON {
		return provisionPrintJSON(map[string]any{"url": inviteURL, "mesh_id": inv.MeshID, "mesh_slug": inv.MeshSlug,
			"uses": inv.UsesLeft, "expires_at": inv.ExpiresAt, "broker_url": parsed.BrokerURL})
	}
	uses := "1 use"
	if inv.UsesLeft != 1 {
		uses = fmt.Sprintf("%d uses", inv.UsesLeft)
	}
	fmt.Fprintf(os.Stderr, "invite to mesh %s: %s, expires %s; join with `claudemesh join <url>`\n",
		inv.MeshSlug, uses, inv.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Println(inviteURL)
	return nil
}

// brokerURL is --broker-url, else the public URL the broker recorded when
// it started; it is checked before an invite is minted for nothing.
func (c *brokerInviteCmd) brokerURL(ctx context.Context, s *broker.Store) (string, error) {
	if c.BrokerURL != "" {
		if _, err := join.InviteURL(c.BrokerURL, "check"); err != nil {
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
	if _, err := join.InviteURL(recorded, "check"); err != nil {
		return "", &exitError{code: 2, err: fmt.Errorf("the broker URL recorded in the database (%s) is not usable: %w; pass --broker-url", recorded, err)}
	}
	fmt.Fprintf(os.Stderr, "broker URL %s, as the broker recorded it when it started (%s); --broker-url overrides it\n",
		recorded, at.UTC().Format(time.RFC3339))
	return recorded, nil
}

type joinCmd struct {
	InviteURL string        `arg:"" name:"invite-url" help:"Invite URL printed by claudemesh broker invite: http(s)://host[:port]/join/<token>."`
	Name      string        `placeholder:"NAME" help:"Display name the other members see (1-128 bytes; default: this machine's hostname)."`
	Timeout   time.Duration `default:"30s" help:"Give up on the broker after this long."`
	JSON      bool          `name:"json" help:"Print the membership (without the secret key) as one JSON object."`
}

func (c *joinCmd) Run() error {
	inv, err := join.ParseInviteURL(c.InviteURL)
	if err != nil {
		return &exitError{code: 2, err: err}
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
	ctx, cancel := provisionContext(c.Timeout)
	defer cancel()
	joined, err := join.Redeem(ctx, inv.JoinURL, id, name)
	if err != nil {
		return joinFailure(err)
	}
	pub := id.PublicKeyHex()
	before, err := paths.AddMembership(config.Membership{
		MeshID: joined.MeshID, MemberID: joined.MemberID, Slug: joined.Slug, Name: joined.Name,
		Pubkey: pub, SecretKey: id.SecretKeyHex(), BrokerURL: joined.BrokerURL,
		JoinedAt: time.Now().UTC().Format(time.RFC3339),
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
	return c.report(paths, joined, pub, before)
}

// report prints the membership and, when a daemon runs, has it attach the
// new mesh (SIGHUP) and says so.
func (c *joinCmd) report(paths config.Paths, joined *join.Joined, pub string, before []config.Membership) error {
	pid, attachErr := attachToRunning(paths, joined.Slug)
	if c.JSON {
		if err := provisionPrintJSON(map[string]any{"mesh_id": joined.MeshID, "member_id": joined.MemberID, "slug": joined.Slug,
			"name": joined.Name, "display_name": joined.DisplayName, "pubkey": pub, "broker_url": joined.BrokerURL,
			"config_file": paths.ConfigFile(), "attached_by_daemon": pid != 0 && attachErr == nil}); err != nil {
			return err
		}
		return attachErr
	}
	fmt.Printf("joined mesh %s as %.12s (broker %s)\n", joined.Slug, pub, joined.BrokerURL)
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

// joinFailure says what went wrong with a redeem and what to do about it.
func joinFailure(err error) error {
	switch {
	case errors.Is(err, join.ErrBadInviteURL):
		return &exitError{code: 2, err: err}
	case errors.Is(err, join.ErrInviteExpired):
		return errors.New("join failed: the invite has expired; ask the mesh owner for a new one (`claudemesh broker invite <slug>`)")
	case errors.Is(err, join.ErrInviteUsedUp):
		return errors.New("join failed: the invite is used up (no uses left); ask the mesh owner for a new one (`claudemesh broker invite <slug>`)")
	case errors.Is(err, join.ErrInviteUnknown):
		return errors.New("join failed: the broker does not know this invite; check that the URL was copied whole, or ask for a new one")
	case errors.Is(err, join.ErrBadRequest) && strings.Contains(err.Error(), "is taken in this mesh"):
		return fmt.Errorf("join failed: %w; join again with another --name (the invite was not used)", err)
	case errors.Is(err, join.ErrUnreachable):
		return fmt.Errorf("join failed: %w; check the invite URL and that the broker is running", err)
	}
	return fmt.Errorf("join failed: %w", err)
}
