package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type launchCmd struct {
	Name    string   `placeholder:"NAME" help:"Display name peers see (default: CLAUDEMESH_DISPLAY_NAME, else <directory>-<4 hex>)."`
	Mesh    string   `placeholder:"SLUG" env:"CLAUDEMESH_MESH" help:"Mesh the session joins (default: the daemon's only mesh, identities of daemon add-agent aside)."`
	Command []string `arg:"" passthrough:"" help:"The command to run (after --), e.g. claude."`
}

// forwarded are the signals launch passes on to its child. SIGINT and
// SIGQUIT from a terminal reach the child already (it is in the terminal's
// foreground process group), so they are forwarded only when launch's stdin
// is not a terminal; launch itself outlives them either way.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// Run registers a session, runs the command as it, and ends the session
// when the command exits, exiting with its code.
func (c *launchCmd) Run() error {
	if len(c.Command) > 0 && c.Command[0] == "--" {
		c.Command = c.Command[1:] // passthrough keeps the separator when flags come before it
	}
	if len(c.Command) == 0 {
		return usageErr("name the command to run after --, e.g. claudemesh launch -- claude")
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx := context.Background()
	v, err := mcpserver.EnsureDaemon(ctx, paths, "")
	if err != nil {
		return err
	}
	mesh, err := mcpserver.ChooseMesh(c.Mesh, v)
	if err != nil {
		return usageErr("%v", err)
	}
	// Inside another launched session, its id and name are not this one's.
	reg, err := mcpserver.NewRegistration("", mesh, c.Name, !mcpserver.InsideSession())
	if err != nil {
		return err
	}
	s, err := mcpserver.Register(ctx, ipc.NewClient(paths.Socket()), reg)
	if err != nil {
		return err
	}
	defer func() {
		if err := s.End(); err != nil {
			fmt.Fprintln(os.Stderr, "claudemesh: launch: deregister the session:", err)
		}
	}()
	dir, tokenFile, err := writeTokenFile(reg.Token)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(withoutSessionEnv(os.Environ()), mcpserver.EnvTokenFile+"="+tokenFile, config.EnvSessionID+"="+reg.SessionID,
		config.EnvMesh+"="+reg.Mesh, config.EnvDisplayName+"="+reg.DisplayName)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return &exitError{code: code, err: fmt.Errorf("launch: %w", err)}
	}
	done := make(chan struct{})
	go forward(cmd.Process, sigs, done, isTerminal(os.Stdin))
	werr := cmd.Wait()
	close(done)
	code := exitCodeOf(cmd.ProcessState)
	if code == 0 {
		return nil
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return &exitError{code: code, err: fmt.Errorf("launch: %w", werr)}
	}
	return &exitError{code: code, err: fmt.Errorf("%s exited %d", c.Command[0], code), reported: true}
}

// forward passes the signals launch receives to p until done.
func forward(p *os.Process, sigs <-chan os.Signal, done <-chan struct{}, terminal bool) {
	for {
		select {
		case <-done:
			return
		case sig := <-sigs:
			if terminal && (sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
				continue // the terminal sent it to the child too
			}
			_ = p.Signal(sig)
		}
	}
}

// exitCodeOf is the exit code launch passes on: the child's, or 128 plus
// the signal that killed it (as a shell reports it).
func exitCodeOf(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// writeTokenFile writes the session token to session-token (0600) in a
// fresh directory (0700) and returns both paths.
func writeTokenFile(token string) (dir, file string, err error) {
	dir, err = os.MkdirTemp("", "claudemesh-session-")
	if err != nil {
		return "", "", fmt.Errorf("launch: token directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("launch: token directory: %w", err)
	}
	file = filepath.Join(dir, "session-token")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(token + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("launch: token file: %w", err)
	}
	return dir, file, nil
}

// withoutSessionEnv is env without the variables that describe a session
// (those of an enclosing launch), which launch sets anew.
func withoutSessionEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case mcpserver.EnvTokenFile, mcpserver.EnvToken, config.EnvSessionID, config.EnvMesh, config.EnvDisplayName:
			continue
		}
		out = append(out, kv)
	}
	return out
}
