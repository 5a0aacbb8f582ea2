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
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// provisionTimeout bounds one provisioning command (opening the store
// included).
const provisionTimeout = 30 * time.Second

// brokerStoreFlags say which broker database a command opens: `broker up`
// serves it, the provisioning commands write to it.
type brokerStoreFlags struct {
	Dir         string `type:"path" xor:"store" placeholder:"DIR" help:"Broker data directory holding broker.db (SQLite). Default: ~/.claudemesh/broker, created 0700."`
	DatabaseURL string `name:"database-url" env:"CLAUDEMESH_DATABASE_URL" xor:"store" placeholder:"URL" help:"PostgreSQL connection URL (postgres://…) of the broker's database, instead of SQLite."`
	serve       bool   // a broker serves it (broker.Options.Serve)
}

// open opens the broker store, for a broker to serve it (serve, set by
// `broker up`) or for a command to provision it. With mustExist, a SQLite
// directory without a broker.db is an error rather than a fresh empty
// database.
func (f *brokerStoreFlags) open(ctx context.Context, mustExist bool, log *slog.Logger) (*broker.Store, error) {
	opts := broker.Options{Dir: f.Dir, DatabaseURL: f.DatabaseURL, Log: log, Serve: f.serve}
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
