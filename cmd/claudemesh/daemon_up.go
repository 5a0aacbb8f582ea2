package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/cmd/internal/gctune"
	"github.com/claudemesh/claudemesh-go/cmd/internal/journal"
	"github.com/claudemesh/claudemesh-go/cmd/internal/sysmon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/deploy"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

type daemonUpCmd struct {
	Foreground bool          `help:"Stay attached to the terminal (what service managers use)."`
	Config     string        `type:"path" placeholder:"FILE" help:"config.toml to read (default: config.toml in the daemon directory)."`
	TCP        string        `name:"tcp" env:"CLAUDEMESH_TCP" placeholder:"ADDR" help:"Loopback address of the bearer-token TCP listener (overrides [ipc]; default 127.0.0.1:47823); port 0 picks one and writes it to http.port."`
	NoTCP      bool          `name:"no-tcp" help:"Serve only the Unix socket. (In a container or under CI that is the default unless config.toml sets [ipc] tcp_enabled.)"`
	LogLevel   string        `enum:",debug,info,warn,error" default:"" env:"CLAUDEMESH_LOG_LEVEL" help:"Minimum log level (overrides [daemon] log_level)."`
	LogFile    string        `hidden:"" type:"path" help:"Write logs to this file with rotation ([log] limits) instead of stderr; set by the detaching up."`
	Legacy     bool          `name:"legacy-broker" help:"Accept a broker that does not negotiate the delivery contract (the upstream broker): no broker-side dedupe, idempotency at the daemon only (also [features] legacy_broker = true in config.toml)."`
	Liveness   time.Duration `hidden:"" name:"broker-liveness" help:"Drop a broker connection silent for this long (default 75s, the protocol's); for tests of silent failures."`
	BodyTime   time.Duration `hidden:"" name:"body-timeout" help:"Answer 408 to an IPC request whose body takes longer than this to arrive (default 10s); for tests of slow clients."`
	// tcpOff is why TCP is off by default here (a container or CI signal),
	// "" when it is not.
	tcpOff string
	// configNamed says --config named the file: it must exist (the default
	// one may not, and then the defaults hold).
	configNamed bool
}

func (c *daemonUpCmd) Run() error {
	if c.Foreground { // first: what follows would be done again after it
		if err := sysmon.KeepAwake(); err != nil {
			fmt.Fprintln(os.Stderr, "claudemesh:", err) // it runs on, its monitor sleeping deeply
		}
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := paths.EnsureDaemonDir(); err != nil {
		return err
	}
	if c.configNamed = c.Config != ""; !c.configNamed {
		c.Config = paths.ConfigTOML()
	}
	cfg, err := c.load()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if !c.Foreground {
		return c.detach(paths, cfg)
	}
	gctune.Set(daemonGCPercent, gcMemoryLimit)
	return c.serve(paths, cfg)
}

// detach starts the daemon in the background (see detach) and says where it
// listens. A start that fails is reported by its cause alone — the
// daemon_start_failed record the new process logged — rather than by the
// log's last lines.
func (c *daemonUpCmd) detach(paths config.Paths, cfg config.File) error {
	var from int64
	if fi, err := os.Stat(paths.LogFile()); err == nil {
		from = fi.Size()
	}
	err := detach(paths, append(os.Args[1:], "--log-file", paths.LogFile()))
	var exited *exitError
	if errors.As(err, &exited) {
		if cause := startFailure(paths.LogFile(), from); cause != "" {
			return &exitError{code: exited.code, err: errors.New(cause)}
		}
		return err
	}
	if err != nil {
		return err
	}
	fmt.Println(c.tcpReport(paths, cfg))
	return nil
}

// startFailure is the err of the last daemon_start_failed record written to
// the log at path after offset from; "" when there is none.
func startFailure(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	var cause string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg string `json:"msg"`
			Err string `json:"err"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "daemon_start_failed" {
			cause = rec.Err
		}
	}
	return cause
}

// tcpReport is the line `daemon up` prints about the TCP listener: off and
// why, or the address it listens on (the port from http.port, which the
// daemon writes when it binds).
func (c *daemonUpCmd) tcpReport(paths config.Paths, cfg config.File) string {
	if cfg.TCPAddr() == "" {
		if c.tcpOff != "" {
			return "tcp: off (" + c.tcpOff + "; enable it with [ipc] tcp_enabled = true in config.toml, or --tcp)"
		}
		return "tcp: off (the Unix socket only)"
	}
	port, ok := httpPort(paths)
	if !ok {
		return "tcp: on, but " + paths.HTTPPort() + " is unreadable; see " + paths.LogFile()
	}
	line := fmt.Sprintf("tcp: %s (bearer token in %s)", net.JoinHostPort(cfg.IPC.HTTPBind, strconv.Itoa(port)), paths.TokenFile())
	if want := cfg.IPC.HTTPPort; want != 0 && want != port {
		line += fmt.Sprintf("; port %d was in use, so it took a free one (clients read it from http.port)", want)
	}
	return line
}

// load reads config.toml and applies the command line's overrides.
func (c *daemonUpCmd) load() (config.File, error) {
	if _, err := os.Stat(c.Config); c.configNamed && errors.Is(err, fs.ErrNotExist) {
		return config.DefaultFile(), fmt.Errorf("--config %s: no such file (leave --config out for config.toml in the daemon directory)", c.Config)
	}
	cfg, err := config.LoadFile(c.Config)
	if err != nil {
		return cfg, err
	}
	c.tcpOff = ""
	if !cfg.TCPSet() {
		// In containers and CI the TCP listener is off unless asked for
		// ([ipc] tcp_enabled, --tcp): the socket serves every local client.
		for _, f := range deploy.Detect(deploy.SystemProbe()) {
			if f.Kind == deploy.KindCI || f.Kind == deploy.KindContainer {
				cfg.IPC.TCPEnabled, c.tcpOff = false, f.String()
				break
			}
		}
	}
	if c.TCP != "" {
		host, port, err := net.SplitHostPort(c.TCP)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			return cfg, fmt.Errorf("--tcp %q: want HOST:PORT", c.TCP)
		}
		cfg.IPC.TCPEnabled, cfg.IPC.HTTPBind, cfg.IPC.HTTPPort = true, host, n
	}
	if c.NoTCP {
		cfg.IPC.TCPEnabled = false
	}
	if c.LogLevel != "" {
		cfg.Daemon.LogLevel = c.LogLevel
	}
	return cfg, nil
}

// logger is where the daemon's logs go and how its level and rotation change
// on reload.
type logger struct {
	*slog.Logger
	level *slog.LevelVar
	file  *daemon.LogFile // nil when logging to stderr (terminal, journald)
}

// openLogger logs to --log-file, else to stderr (with the priority
// prefixes journald reads, when stderr is the journal: cmd/internal/journal).
func (c *daemonUpCmd) openLogger(cfg config.File) (*logger, error) {
	l := &logger{level: new(slog.LevelVar)}
	opts := &slog.HandlerOptions{Level: l.level}
	if c.LogFile == "" {
		l.Logger = slog.New(journal.NewHandler(os.Stderr, opts))
		l.apply(cfg)
		return l, nil
	}
	f, err := daemon.OpenLogFile(c.LogFile, cfg.Log.MaxSizeMB, cfg.Log.MaxAgeDays)
	if err != nil {
		return nil, err
	}
	l.file, l.Logger = f, slog.New(slog.NewJSONHandler(f, opts))
	l.apply(cfg)
	return l, nil
}

// apply sets the hot settings: the level and the rotation limits.
func (l *logger) apply(cfg config.File) {
	_ = l.level.UnmarshalText([]byte(cfg.Daemon.LogLevel)) // validated by config.LoadFile
	if l.file != nil {
		l.file.SetLimits(cfg.Log.MaxSizeMB, cfg.Log.MaxAgeDays)
	}
}

func (c *daemonUpCmd) serve(paths config.Paths, cfg config.File) error {
	log, err := c.openLogger(cfg)
	if err != nil {
		return err
	}
	if log.file != nil {
		defer log.file.Close()
	}
	// Signals are caught before anything is served: a SIGHUP or SIGTERM that
	// arrives the moment the socket answers must not kill the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	if c.tcpOff != "" && !cfg.IPC.TCPEnabled {
		log.Info("tcp_off_by_default", "because", c.tcpOff, "enable_with", "[ipc] tcp_enabled = true in config.toml, or --tcp")
	}

	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: version, Log: log.Logger, LegacyBroker: c.Legacy || cfg.Features.LegacyBroker,
		Faults: faults(), BrokerLiveness: c.Liveness, BodyTimeout: c.BodyTime, TCPFallback: c.TCP == ""})
	if err != nil {
		return c.startFailed(log, err)
	}
	defer d.Close()
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady) // no-op outside systemd
	return c.wait(d, log, cfg, sig)
}

// startFailed maps a start-up failure to its exit code. A detached daemon
// logs it as a JSON record (its stderr is daemon.log too, and the parent
// shows the log's tail), so main does not print it again.
func (c *daemonUpCmd) startFailed(log *logger, err error) error {
	code := 1
	switch {
	case errors.Is(err, config.ErrHostMismatch):
		code, err = 4, fmt.Errorf("%w\nif this machine is meant to run this daemon (a hardware change, a deliberate move), "+
			"run `claudemesh daemon accept-host`; a cloned machine should get a fresh daemon directory instead", err)
	case errors.Is(err, daemon.ErrConfig):
		code = 2
	case errors.Is(err, persistence.ErrIntegrity):
		code, err = 8, errors.New(err.Error()+"; the outbox cannot be rebuilt: keep the file and restore it from a backup")
	}
	if log.file != nil {
		log.Error("daemon_start_failed", "err", err.Error(), "exit_code", code)
		return &exitError{code: code, err: err, reported: true}
	}
	return &exitError{code: code, err: err}
}

// wait runs until SIGTERM/SIGINT (clean exit) or a fatal error; SIGHUP
// re-reads config.toml and applies the keys that can change while running.
func (c *daemonUpCmd) wait(d *daemon.Daemon, log *logger, running config.File, sig <-chan os.Signal) error {
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				c.reload(d, log, running)
				continue
			}
			sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
			log.Info("daemon_shutdown", "signal", s.String())
			return nil
		case err := <-d.Fatal():
			log.Error("daemon_fatal", "err", err)
			var neg *wsclient.NegotiationError
			if errors.As(err, &neg) {
				return &exitError{code: 5, err: err} // spec §1.4: broker feature negotiation failed
			}
			return err
		}
	}
}

// reload applies a changed config.toml — log level, rotation, the disk
// pressure limits, the outbox's fsync mode and the retention now — and
// serves the
// memberships config.json now has. Where [ipc] or [clone] differ from what
// the daemon runs with, the log says a restart is needed. A file that does
// not validate is ignored and the settings stay as they are.
func (c *daemonUpCmd) reload(d *daemon.Daemon, log *logger, running config.File) {
	added, removed, err := d.SyncMemberships()
	if err != nil {
		log.Error("mesh_sync_failed", "attached", added, "detached", removed, "err", err)
	} else if len(added)+len(removed) > 0 {
		log.Info("meshes_synced", "attached", added, "detached", removed)
	}
	cfg, err := c.load()
	if err != nil {
		log.Error("config_reload_failed", "err", err)
		d.NoteReload(err)
		return
	}
	log.apply(cfg)
	d.SetDiskLimits(cfg.DiskLimits())
	d.SetFsyncMode(cfg.Fsync())
	d.SetRetention(cfg)
	restart := []string{}
	if cfg.TCPAddr() != running.TCPAddr() || cfg.IPC.PublicHealthCheck != running.IPC.PublicHealthCheck ||
		!slices.Equal(cfg.IPC.OriginAllowlist, running.IPC.OriginAllowlist) {
		restart = append(restart, "ipc")
	}
	if cfg.Clone != running.Clone {
		restart = append(restart, "clone")
	}
	d.NoteReload(nil)
	log.Info("config_reloaded", "file", c.Config, "log_level", cfg.Daemon.LogLevel,
		"fsync_mode", cfg.Outbox.FsyncMode, "restart_required_for", restart)
}
