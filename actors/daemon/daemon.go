// Package daemon assembles a running claudemesh daemon: the lock on the
// daemon directory, the identities, the IPC listeners (bound, not yet
// served), the databases and their crash recovery, the actor tree, and then
// serving, in that order, and takes them down in reverse.
//
// It decides nothing about the process (detaching, signals, exit codes):
// cmd/claudemesh does that. Tests start a real daemon in-process with Start.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Timings.
const (
	RecoveryBackoff = 500 * time.Millisecond // spec §4.13: min_backoff
	ShutdownTimeout = 5 * time.Second
	// DrainTimeout is how long a stop waits for the IPC requests already
	// running before it closes their connections.
	DrainTimeout = 2 * time.Second
	// ReleaseTimeout is the stop's own time to return inflight rows to
	// pending, whatever the steps before it took.
	ReleaseTimeout = 2 * time.Second
)

// ErrConfig marks a start-up failure caused by the user's files or flags.
var ErrConfig = errors.New("configuration error")

// Options configure a daemon.
type Options struct {
	Paths   config.Paths
	Config  config.File // config.toml with the command line's overrides applied
	Version string
	Log     *slog.Logger
	// LegacyBroker accepts brokers that do not negotiate the delivery
	// contract (the upstream broker): daemon-layer idempotency only.
	LegacyBroker bool
	// Faults are failures injected by tests (nil in production).
	Faults *actors.Faults
	// ReapInterval is how often sessions whose process is gone are
	// dropped (0: DefaultReapInterval).
	ReapInterval time.Duration
	// KeySweepInterval is how often the key files of sessions that ended
	// long ago are removed, besides at the start (0:
	// DefaultKeySweepInterval).
	KeySweepInterval time.Duration
	// BrokerLiveness is how long a silent broker connection is kept before
	// it is dropped and dialled again (0: the protocol's 75 s). Tests of
	// silent failures shorten it.
	BrokerLiveness time.Duration
	// BodyTimeout bounds how long an IPC request body may take to arrive
	// (0: ipcserver.DefaultBodyTimeout). Tests of slow clients shorten it.
	BodyTimeout time.Duration
	// TCPFallback binds another loopback port (the kernel's choice, written
	// to http.port) when the configured one is taken, e.g. by the daemon of
	// another directory; without it the start fails. (An address given on
	// the command line is meant; one from config.toml or the default is not.)
	TCPFallback bool
}

// Daemon is a running daemon.
type Daemon struct {
	opts      Options
	log       *slog.Logger
	lock      *config.PidLock
	outbox    *persistence.Outbox
	inbox     *persistence.Inbox
	pressure  *persistence.Pressure
	fsync     *config.FsyncPolicy
	embedded  *embeddedBroker
	tree      *actors.Tree
	server    *ipcserver.Server
	listeners []net.Listener
	tcpAddr   string
	fatal     chan error
	system    *actor.ActorSystem // the tree's, which the embedded broker shares
	sessions  *sessions
	hooks     *hooks
	features  messages.BrokerFeatures // what each mesh's broker negotiated (GET /v1/version)
	stopReap  context.CancelFunc
}

// Start brings a daemon up; on error everything it had opened is closed.
func Start(opts Options) (_ *Daemon, err error) {
	if err := opts.Paths.EnsureDaemonDir(); err != nil {
		return nil, err
	}
	lock, err := opts.Paths.LockPidFile()
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, log: opts.Log, lock: lock, fatal: make(chan error, 1)}
	if f := opts.Faults; f != nil {
		d.log.Warn("fault_injection_armed", "inbox_panic", f.InboxPanic)
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.checkHost(); err != nil {
		return nil, err
	}
	meshes, members, token, err := d.identity()
	if err != nil {
		return nil, err
	}
	// Bound before anything starts, so that the commonest failure (a port
	// or socket in use) leaves no actor and no database to take down.
	if d.listeners, err = d.listen(); err != nil {
		return nil, err
	}
	if err := d.openStore(); err != nil {
		return nil, err
	}
	if err := d.openHooks(); err != nil {
		return nil, err
	}
	// Protoactor reports each message to a stopped actor at info; at a
	// stop, and after a failed start, those are routine: debug.
	system := actors.NewSystem(slog.New(deadLettersAtDebug{d.log.Handler()}))
	d.system = system
	configs, err := d.meshConfigs(meshes, members)
	if err != nil {
		return nil, err
	}
	series := metrics.New()
	outboxMax, reserved := opts.Config.DiskLimits()
	d.pressure = persistence.NewPressure(opts.Paths.DaemonDir, opts.Paths.OutboxDB(),
		persistence.DiskLimits{OutboxMaxBytes: outboxMax, ReservedBytes: reserved})
	if _, err := d.pressure.Measure(); err != nil { // IPC refuses sends from the first if it must; the store reports it
		d.log.Warn("measure disk pressure", "err", err)
	}
	d.fsync = config.NewFsyncPolicy(opts.Config.Fsync())
	if d.tree, err = actors.Start(system, actors.Deps{Outbox: d.outbox, Inbox: d.inbox, Hooks: d.hooks.db, HookWorker: d.hooks.worker(series), Meshes: configs, Log: d.log, Fatal: d.fatal,
		Metrics: series, Pressure: d.pressure, Fsync: d.fsync, Retention: retentionOf(opts.Config), Faults: opts.Faults}); err != nil {
		return nil, err
	}
	conns := map[string]*actor.PID{}
	for slug, m := range d.tree.Meshes {
		conns[slug] = m.Conn
	}
	d.sessions = newSessions(d)
	d.server = ipcserver.New(ipcserver.Options{Token: token, Sessions: d.sessions, Hooks: d.hooks, Features: &d.features, Root: system.Root, Store: d.tree.Store, Accept: d.tree.Accept,
		Events: d.tree.Events, MeshActors: conns, Metrics: series,
		Pressure: d.pressure, Fsync: d.fsync, RotateToken: opts.Paths.RotateLocalToken,
		Meshes: meshes, DaemonVersion: opts.Version, SchemaVersion: d.outbox.SchemaVersion(), Started: time.Now(),
		OriginAllowlist: opts.Config.IPC.OriginAllowlist, PublicHealth: opts.Config.IPC.PublicHealthCheck,
		BodyTimeout: opts.BodyTimeout, TCPAddr: d.tcpAddr, WebSignedIn: opts.Paths.WebSignedIn(), Log: d.log})
	if err := d.sessions.restore(); err != nil {
		return nil, err
	}
	reapCtx, stopReap := context.WithCancel(context.Background())
	d.stopReap = stopReap
	go every(reapCtx, cmp.Or(opts.ReapInterval, DefaultReapInterval), d.sessions.reap)
	d.sessions.sweepKeys(time.Now())
	go every(reapCtx, cmp.Or(opts.KeySweepInterval, DefaultKeySweepInterval), d.sessions.sweepKeys)
	for _, l := range d.listeners {
		go func() { d.fail(d.server.Serve(l)) }()
	}
	d.hooks.serve()
	d.log.Info("daemon_started", "version", opts.Version, "pid", os.Getpid(), "sock", opts.Paths.Socket(),
		"tcp", d.tcpAddr, "meshes", len(meshes), "fsync_mode", d.fsync.Mode().String())
	return d, nil
}

// Fatal delivers the error that ended the daemon from inside: a listener
// that failed, or an actor that could not be kept alive.
func (d *Daemon) Fatal() <-chan error { return d.fatal }

// TCPAddr is the bound TCP address, "" without a TCP listener.
func (d *Daemon) TCPAddr() string { return d.tcpAddr }

// checkHost applies [clone] policy to a host that is not the one recorded
// in host_fingerprint.json: refuse returns config.ErrHostMismatch.
func (d *Daemon) checkHost() error {
	err := d.opts.Paths.CheckHost()
	if !errors.Is(err, config.ErrHostMismatch) {
		return err
	}
	switch d.opts.Config.Clone.Policy {
	case config.ClonePolicyWarn:
		d.log.Warn("host_fingerprint_mismatch", "err", err, "policy", "warn")
		return nil
	case config.ClonePolicyAllow:
		d.log.Info("host_fingerprint_mismatch", "err", err, "policy", "allow")
		return nil
	}
	return err
}

// identity loads (or creates) the mesh memberships and the local token.
func (d *Daemon) identity() ([]ipcserver.Mesh, []config.Membership, string, error) {
	token, err := d.opts.Paths.EnsureLocalToken()
	if err != nil {
		return nil, nil, "", err
	}
	members, err := d.opts.Paths.EnsureMemberships()
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %w", ErrConfig, err)
	}
	meshes := make([]ipcserver.Mesh, 0, len(members))
	for _, m := range members {
		mesh, err := d.meshOf(m)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%w: %w", ErrConfig, err)
		}
		meshes = append(meshes, mesh)
	}
	return meshes, members, token, nil
}

// meshOf is a membership as the IPC server serves it, with its identity;
// the identity must be the one the membership's pubkey names.
func (d *Daemon) meshOf(m config.Membership) (ipcserver.Mesh, error) {
	id, err := meshcrypto.ParseIdentity(m.SecretKey)
	if err != nil || id.PublicKeyHex() != m.Pubkey {
		return ipcserver.Mesh{}, fmt.Errorf("%s: mesh %q: secretKey does not match pubkey", d.opts.Paths.ConfigFile(), m.Slug)
	}
	profile, _ := d.opts.Paths.ProfileDisplayName() // unreadable: the hello's name falls back as meshConfigs' does
	return ipcserver.Mesh{Identity: id, Name: m.HelloName(profile), Info: messages.MeshInfo{Mesh: m.Slug, MeshID: m.MeshID, MemberID: m.MemberID,
		MemberPubkey: m.Pubkey, Agent: m.LocalAgent()}}, nil
}

// meshConfigs builds each mesh's subtree configuration; memberships
// without a brokerUrl are served by the embedded broker.
func (d *Daemon) meshConfigs(meshes []ipcserver.Mesh, members []config.Membership) ([]actors.MeshConfig, error) {
	var local []config.Membership
	for _, m := range members {
		if m.BrokerURL == "" {
			local = append(local, m)
		}
	}
	if len(local) > 0 {
		var err error
		if d.embedded, err = d.startEmbeddedBroker(local, d.system); err != nil {
			return nil, err
		}
	}
	configs := make([]actors.MeshConfig, len(members))
	for i, m := range members {
		configs[i] = d.meshConfig(m, meshes[i].Identity)
	}
	return configs, nil
}

// SetDiskLimits changes the disk pressure thresholds ([outbox]
// max_size_mb, [disk] reserved_mb, in bytes) and has the store measure
// against them at once.
func (d *Daemon) SetDiskLimits(outboxMaxBytes, reservedBytes int64) {
	d.pressure.SetLimits(persistence.DiskLimits{OutboxMaxBytes: outboxMaxBytes, ReservedBytes: reservedBytes})
	d.tree.System.Root.Send(d.tree.Store, &messages.MeasurePressure{})
}

// NoteReload records the outcome of a SIGHUP reload (GET /v1/version).
func (d *Daemon) NoteReload(err error) { d.server.NoteReload(err) }

// SetFsyncMode changes [outbox] fsync_mode from the store's next batch on.
func (d *Daemon) SetFsyncMode(mode config.FsyncMode) { d.fsync.Set(mode) }

// SetRetention applies [inbox] and [outbox] retention_days from the next
// retention pass on.
func (d *Daemon) SetRetention(cfg config.File) {
	d.tree.System.Root.Send(d.tree.Store, &messages.SetRetention{Retention: retentionOf(cfg)})
}

func retentionOf(cfg config.File) messages.Retention {
	return messages.Retention{InboxDays: cfg.Inbox.RetentionDays, OutboxDays: cfg.Outbox.RetentionDays}
}

// meshConfig is one membership's subtree configuration; a membership
// without a brokerUrl is served by the embedded broker.
func (d *Daemon) meshConfig(m config.Membership, id *meshcrypto.Identity) actors.MeshConfig {
	url, dial := m.BrokerURL, actors.DialFunc(nil)
	if url == "" {
		url, dial = d.embedded.url, d.embedded.pipes.Dial
	}
	profile, err := d.opts.Paths.ProfileDisplayName()
	if err != nil {
		d.log.Warn("profile_display_name_unreadable", "err", err) // the membership's own name, or the hostname, then
	}
	cfg := actors.MeshConfig{Slug: m.Slug, MeshID: m.MeshID, MemberID: m.MemberID, Identity: id,
		Name: m.HelloName(profile), URL: url, Dial: dial, Legacy: d.opts.LegacyBroker, Liveness: d.opts.BrokerLiveness,
		Features: &d.features, Version: d.opts.Version}
	return cfg
}

// SyncMemberships makes the served meshes those of config.json (SIGHUP
// calls it): it attaches the memberships gained since the start (`claudemesh
// join`, `claudemesh daemon add-agent`) and detaches those removed, and
// returns the slugs of both. A membership of the embedded broker needs the
// embedded broker running, that is a local mesh at start. A detached mesh's
// rows stay in the outbox.
func (d *Daemon) SyncMemberships() (added, removed []string, err error) {
	members, err := d.opts.Paths.LoadMemberships()
	if err != nil {
		return nil, nil, err
	}
	keep := map[string]bool{}
	for _, m := range members {
		keep[m.Slug] = true
	}
	for _, m := range d.server.Memberships() {
		if keep[m.Info.Mesh] {
			continue
		}
		d.server.RemoveMesh(m.Info.Mesh)
		if err := d.tree.Detach(m.Info.Mesh); err != nil {
			return added, removed, err
		}
		removed = append(removed, m.Info.Mesh)
		d.log.Info("mesh_detached", "mesh", m.Info.Mesh)
	}
	added, err = d.attach(members)
	return added, removed, err
}

// attach attaches the memberships not served yet and returns their slugs.
func (d *Daemon) attach(members []config.Membership) ([]string, error) {
	var added []string
	for _, m := range members {
		if _, err := d.server.MeshBySlug(m.Slug); err == nil {
			continue
		}
		mesh, err := d.meshOf(m)
		if err != nil {
			return added, err
		}
		if m.BrokerURL == "" {
			if d.embedded == nil {
				return added, fmt.Errorf("mesh %q is the embedded broker's, which this daemon did not start: restart the daemon", m.Slug)
			}
			if err := register(context.Background(), d.embedded.store, m); err != nil {
				return added, fmt.Errorf("embedded broker: register %s: %w", m.Slug, err)
			}
		}
		pids, err := d.tree.Attach(d.meshConfig(m, mesh.Identity))
		if err != nil {
			return added, err
		}
		d.server.AddMesh(mesh, pids.Conn)
		added = append(added, m.Slug)
		d.log.Info("mesh_attached", "mesh", m.Slug)
	}
	return added, nil
}

// openStore opens and checks both databases and runs crash recovery, all
// before anything is served (spec §4.13). An outbox that fails its
// integrity check is returned as persistence.ErrIntegrity.
func (d *Daemon) openStore() error {
	ctx := context.Background()
	var err error
	if d.outbox, err = persistence.OpenOutbox(ctx, d.opts.Paths.OutboxDB()); err != nil {
		return err
	}
	if len(d.outbox.Restored) > 0 {
		d.log.Warn("audit_triggers_restored", "objects", d.outbox.Restored, "detail",
			"outbox.db's audit triggers were changed outside the daemon and are restored; transitions made meanwhile are not in the "+
				"audit log (the entry audit.restored marks the gap): run `claudemesh daemon audit verify`")
	}
	n, err := d.outbox.RecoverInflight(ctx, time.Now(), RecoveryBackoff)
	if err != nil {
		return err
	}
	if n > 0 {
		d.log.Info("outbox_inflight_recovered", "rows", n)
	}
	inboxDB, err := persistence.OpenInbox(ctx, d.opts.Paths.InboxDB(), d.log)
	if err != nil {
		return err
	}
	if d.inbox, err = persistence.NewInbox(inboxDB); err != nil {
		inboxDB.Close()
		return err
	}
	return nil
}

// listen binds the Unix socket and, when TCP is on, the loopback port,
// whose number it writes to http.port; both files are claimed as this
// daemon's, for the stop to remove.
func (d *Daemon) listen() ([]net.Listener, error) {
	paths := d.opts.Paths
	unix, err := ipcserver.ListenUnix(paths.Socket())
	if err != nil {
		return nil, err
	}
	if err := d.lock.Claim(filepath.Base(paths.Socket())); err != nil {
		unix.Close()
		return nil, err
	}
	portFile := filepath.Base(paths.HTTPPort())
	addr := d.opts.Config.TCPAddr()
	if addr == "" {
		if err := d.lock.RemoveStale(portFile); err != nil { // a killed daemon's
			d.log.Warn("remove stale http.port", "err", err)
		}
		return []net.Listener{unix}, nil
	}
	tcp, err := ipcserver.ListenTCP(addr, paths.HTTPPort())
	if errors.Is(err, syscall.EADDRINUSE) && d.opts.TCPFallback {
		host, _, _ := net.SplitHostPort(addr)
		if tcp, err = ipcserver.ListenTCP(net.JoinHostPort(host, "0"), paths.HTTPPort()); err == nil {
			d.log.Warn("tcp_port_in_use", "configured", addr, "tcp", tcp.Addr().String(),
				"hint", "clients read the port from http.port; set [ipc] http_port or --tcp to choose one")
		}
	}
	if err == nil {
		err = d.lock.Claim(portFile)
	}
	if err != nil {
		unix.Close()
		if tcp != nil {
			tcp.Close()
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the port is in use (by another daemon directory's daemon or another program); "+
				"choose another with --tcp 127.0.0.1:PORT (port 0 picks a free one and writes it to http.port), or serve the socket only with --no-tcp", addr)
		}
		return nil, fmt.Errorf("listen on %s: %w (use --tcp ADDR or --no-tcp)", addr, err)
	}
	d.tcpAddr = tcp.Addr().String()
	return []net.Listener{unix, tcp}, nil
}

func (d *Daemon) fail(err error) {
	if err != nil {
		select {
		case d.fatal <- err:
		default:
		}
	}
}

// Close shuts down in order: stop serving IPC (running requests get
// DrainTimeout to finish; bodies still arriving and idle connections are
// cut at once), let the actors drain their mailboxes, return this
// process's inflight rows to pending (with ReleaseTimeout of its own),
// close the databases, remove the socket, http.port and the pid file —
// each only if it is still the one this daemon created — and drop the lock.
func (d *Daemon) Close() {
	if d.stopReap != nil {
		d.stopReap()
	}
	d.stopServing()
	if d.hooks != nil {
		d.hooks.close()
	}
	if d.sessions != nil {
		d.sessions.close()
	}
	if d.tree != nil {
		if err := d.tree.System.Root.PoisonFuture(d.tree.Root).Wait(); err != nil {
			d.log.Warn("actor shutdown", "err", err)
		}
	}
	if d.embedded != nil { // before the system it shares stops
		d.embedded.close()
	}
	if d.system != nil {
		d.system.Shutdown()
	}
	if d.hooks != nil {
		d.hooks.closeDB()
	}
	d.closeStore()
	if err := d.lock.Release(); err != nil {
		d.log.Warn("release daemon directory lock", "err", err)
	}
}

// stopServing stops the listeners and waits up to DrainTimeout for the
// requests already running, then closes what is left; the socket and
// http.port go at once, so clients see the daemon gone.
func (d *Daemon) stopServing() {
	if d.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		if err := d.server.Shutdown(ctx); err != nil {
			d.log.Warn("ipc_shutdown_forced", "err", err, "after", DrainTimeout.String())
			d.server.Close()
		}
		cancel()
	}
	for _, l := range d.listeners { // a failed start's were never served
		l.Close()
	}
	for _, name := range []string{d.opts.Paths.Socket(), d.opts.Paths.HTTPPort()} {
		if err := d.lock.Remove(filepath.Base(name)); err != nil {
			d.log.Warn("remove "+filepath.Base(name), "err", err)
		}
	}
}

// closeStore returns the inflight rows to pending and closes both
// databases.
func (d *Daemon) closeStore() {
	if d.outbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
		if n, err := d.outbox.ReleaseInflight(ctx, time.Now()); err != nil {
			d.log.Error("outbox_inflight_release_failed", "err", err, "next", "the next start recovers them, counting an attempt")
		} else if n > 0 {
			d.log.Info("outbox_inflight_released", "rows", n)
		}
		cancel()
		if err := d.outbox.Close(); err != nil {
			d.log.Warn("close outbox", "err", err)
		}
	}
	if d.inbox != nil {
		if err := d.inbox.Close(); err != nil {
			d.log.Warn("close inbox", "err", err)
		}
	}
}

// deadLettersAtDebug is a log handler that lowers protoactor's
// "[DeadLetter]" records (a message to an actor that has stopped) to
// debug.
type deadLettersAtDebug struct{ slog.Handler }

func (h deadLettersAtDebug) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "[DeadLetter]" {
		r.Level = slog.LevelDebug
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h deadLettersAtDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return deadLettersAtDebug{h.Handler.WithAttrs(attrs)}
}

func (h deadLettersAtDebug) WithGroup(name string) slog.Handler {
	return deadLettersAtDebug{h.Handler.WithGroup(name)}
}
