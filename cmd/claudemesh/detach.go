package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/sysmon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// startupWait bounds how long a detaching `daemon up` waits for the new
// daemon to answer on its socket.
const startupWait = 3 * time.Second

// detach re-runs this command with --foreground in a new session, stdin from
// /dev/null and output appended to daemon.log, and reports success only when
// the new process answers GET /v1/version on the socket with its own pid.
func detach(paths config.Paths, args []string) error {
	client := ipc.NewClient(paths.Socket())
	if v, err := client.Version(context.Background()); err == nil {
		return fmt.Errorf("daemon already running (pid %d)", v.PID)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(paths.LogFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", paths.LogFile(), err)
	}
	defer logFile.Close()
	cmd := exec.Command(exe, append(args, "--foreground")...)
	cmd.Env, _ = sysmon.Environ() // what it would otherwise re-execute itself for
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // stdin is /dev/null when nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(startupWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		v, err := client.Version(ctx)
		cancel()
		if err == nil && v.PID == cmd.Process.Pid {
			fmt.Printf("daemon started (pid %d)\nlog: %s\nsocket: %s\n", v.PID, paths.LogFile(), paths.Socket())
			return nil
		}
		select {
		case err := <-exited:
			failure := fmt.Errorf("daemon exited during start-up (%v); last lines of %s:\n%s", err, paths.LogFile(), tail(paths.LogFile(), 5))
			return &exitError{code: cmd.ProcessState.ExitCode(), err: failure}
		case <-tick.C:
		}
	}
	return fmt.Errorf("daemon (pid %d) did not answer on %s within %s; see %s", cmd.Process.Pid, paths.Socket(), startupWait, paths.LogFile())
}

// tail returns the last n lines of a file, indented.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "  (unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, "  "+sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
