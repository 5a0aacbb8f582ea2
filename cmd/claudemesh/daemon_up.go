package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Start-up and shutdown constants.
const (
	recoveryBackoff = 500 * time.Millisecond // spec §4.13: min_backoff
	shutdownTimeout = 5 * time.Second
)

type daemonUpCmd struct {
	Foreground bool   `help:"Stay attached to the terminal (what service managers use)."`
	TCP        string `name:"tcp" default:"127.0.0.1:47823" placeholder:"ADDR" help:"Loopback address of the bearer-token TCP listener; port 0 picks one and writes it to http.port."`
	NoTCP      bool   `name:"no-tcp" help:"Serve only the Unix socket."`
	LogLevel   string `default:"info" enum:"debug,info,warn,error" help:"Minimum log level (${enum})."`
}

func (c *daemonUpCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{2, err}
	}
	if err := paths.EnsureDaemonDir(); err != nil {
		return err
	}
	if !c.Foreground {
		return detach(paths, os.Args[1:])
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel)) // kong's enum already validated it
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return c.run(paths, log)
}

// daemon is what a running daemon holds until shutdown.
type daemon struct {
	paths  config.Paths
	log    *slog.Logger
	lock   *config.PidLock
	outbox *persistence.Outbox
	tree   *actors.Tree
	server *ipc.Server
	fatal  chan error
}

func (c *daemonUpCmd) run(paths config.Paths, log *slog.Logger) error {
	lock, err := paths.LockPidFile()
	if err != nil {
		return err
	}
	d := &daemon{paths: paths, log: log, lock: lock, fatal: make(chan error, 1)}
	defer d.close()
	meshes, token, err := d.identity()
	if err != nil {
		return err
	}
	if err := d.openStore(); err != nil {
		return err
	}
	system := actors.NewSystem(log)
	if d.tree, err = actors.Start(system, d.outbox, log, d.fatal); err != nil {
		return err
	}
	d.server = ipc.New(ipc.Options{Token: token, Root: system.Root, Store: d.tree.Store, Accept: d.tree.Accept,
		Meshes: meshes, DaemonVersion: version, SchemaVersion: d.outbox.SchemaVersion(), Started: time.Now(), Log: log})
	listeners, err := c.listen(paths)
	if err != nil {
		return err
	}
	for _, l := range listeners {
		go func() { d.fatalf(d.server.Serve(l)) }()
	}
	log.Info("daemon_started", "version", version, "pid", os.Getpid(), "sock", paths.Socket(),
		"tcp", c.tcpAddr(listeners), "meshes", len(meshes))
	return d.wait()
}

// identity loads (or creates) the mesh memberships and the local token.
func (d *daemon) identity() ([]ipc.Mesh, string, error) {
	token, err := d.paths.EnsureLocalToken()
	if err != nil {
		return nil, "", err
	}
	members, err := d.paths.EnsureMemberships()
	if err != nil {
		return nil, "", &exitError{2, err}
	}
	meshes := make([]ipc.Mesh, 0, len(members))
	for _, m := range members {
		id, err := meshcrypto.ParseIdentity(m.SecretKey)
		if err != nil || id.PublicKeyHex() != m.Pubkey {
			return nil, "", &exitError{2, fmt.Errorf("%s: mesh %q: secretKey does not match pubkey", d.paths.ConfigFile(), m.Slug)}
		}
		meshes = append(meshes, ipc.Mesh{Identity: id, Info: messages.MeshInfo{
			Mesh: m.Slug, MeshID: m.MeshID, MemberID: m.MemberID, MemberPubkey: m.Pubkey}})
	}
	return meshes, token, nil
}

// openStore opens and checks both databases and runs crash recovery, all
// before anything is served (spec §4.13).
func (d *daemon) openStore() error {
	ctx := context.Background()
	var err error
	if d.outbox, err = persistence.OpenOutbox(ctx, d.paths.OutboxDB()); err != nil {
		if errors.Is(err, persistence.ErrIntegrity) {
			return &exitError{8, fmt.Errorf("%w; the outbox cannot be rebuilt: keep the file and restore it from a backup", err)}
		}
		return err
	}
	n, err := d.outbox.RecoverInflight(ctx, time.Now(), recoveryBackoff)
	if err != nil {
		return err
	}
	if n > 0 {
		d.log.Info("outbox_inflight_recovered", "rows", n)
	}
	// The inbox is migrated and checked here; its actor owns it from the
	// end-to-end delivery milestone on.
	inbox, err := persistence.OpenInbox(ctx, d.paths.InboxDB(), d.log)
	if err != nil {
		return err
	}
	return inbox.Close()
}

func (c *daemonUpCmd) listen(paths config.Paths) ([]net.Listener, error) {
	unix, err := ipc.ListenUnix(paths.Socket())
	if err != nil {
		return nil, err
	}
	if c.NoTCP {
		os.Remove(paths.HTTPPort())
		return []net.Listener{unix}, nil
	}
	tcp, err := ipc.ListenTCP(c.TCP, paths.HTTPPort())
	if err != nil {
		unix.Close()
		return nil, fmt.Errorf("listen on %s: %w (use --tcp ADDR or --no-tcp)", c.TCP, err)
	}
	return []net.Listener{unix, tcp}, nil
}

func (c *daemonUpCmd) tcpAddr(ls []net.Listener) string {
	if len(ls) < 2 {
		return ""
	}
	return ls[1].Addr().String()
}

func (d *daemon) fatalf(err error) {
	if err != nil {
		select {
		case d.fatal <- err:
		default:
		}
	}
}

// wait blocks until SIGTERM/SIGINT (clean exit) or a fatal error.
func (d *daemon) wait() error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		d.log.Info("daemon_shutdown", "signal", s.String())
		return nil
	case err := <-d.fatal:
		d.log.Error("daemon_fatal", "err", err)
		return err
	}
}

// close shuts down in order: stop serving IPC, let the actors finish what
// is in their mailboxes, close the databases, remove the socket and the pid
// file.
func (d *daemon) close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if d.server != nil {
		if err := d.server.Shutdown(ctx); err != nil {
			d.log.Warn("ipc shutdown", "err", err)
		}
		os.Remove(d.paths.Socket())
	}
	if d.tree != nil {
		if err := d.tree.System.Root.PoisonFuture(d.tree.Root).Wait(); err != nil {
			d.log.Warn("actor shutdown", "err", err)
		}
		d.tree.System.Shutdown()
	}
	if d.outbox != nil {
		if err := d.outbox.Close(); err != nil {
			d.log.Warn("close outbox", "err", err)
		}
	}
	if err := d.lock.Release(); err != nil {
		d.log.Warn("release pid file", "err", err)
	}
}
