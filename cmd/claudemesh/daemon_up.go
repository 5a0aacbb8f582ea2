package main

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/persistence"
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

	opts := daemon.Options{Paths: paths, TCPAddr: c.TCP, Version: version, Log: log}
	if c.NoTCP {
		opts.TCPAddr = ""
	}
	d, err := daemon.Start(opts)
	switch {
	case errors.Is(err, daemon.ErrConfig):
		return &exitError{2, err}
	case errors.Is(err, persistence.ErrIntegrity):
		return &exitError{8, errors.New(err.Error() + "; the outbox cannot be rebuilt: keep the file and restore it from a backup")}
	case err != nil:
		return err
	}
	defer d.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		log.Info("daemon_shutdown", "signal", s.String())
		return nil
	case err := <-d.Fatal():
		log.Error("daemon_fatal", "err", err)
		return err
	}
}
