package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

func TestBrokerReadme(t *testing.T) {
	readme := readBrokerFile(t, "README.md")
	for _, want := range []string{
		"claudemesh broker up --listen " + brokerUnitListen + " --dir " + brokerStateDir,
		"broker mesh create", "broker invite", "claudemesh join", "--broker-url",
		"--database-url", "--redis-url", "PGPASSWORD", "Redis", "TLS", "`/ws`", "`/join`", "/health",
		"compose.yaml", brokerUnitFile,
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}

// readmeCommands are the claudemesh command lines in the README's sh
// blocks, continuations joined, from "claudemesh" on.
func readmeCommands(readme string) [][]string {
	var out [][]string
	in := false
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		fields := strings.Fields(cur.String())
		cur.Reset()
		for i, f := range fields {
			if f == "claudemesh" && i+1 < len(fields) && (fields[i+1] == "broker" || fields[i+1] == "join") {
				out = append(out, fields[i:])
				break
			}
		}
	}
	return out
}

// TestBrokerCommandLines builds claudemesh and checks that every flag the
// unit, the compose file and the README pass exists, then runs the unit's
// ExecStart (listen address and directory moved into the test) until it
// serves /health, and stops it with SIGTERM.
func TestBrokerCommandLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds claudemesh")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go is not on PATH under CI=true")
		}
		t.Skip("go is not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "claudemesh")
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/claudemesh/claudemesh-go/cmd/claudemesh").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/claudemesh: %v\n%s", err, out)
	}
	flagRE := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)`)
	flagsOf := map[string][]string{}
	flags := func(sub string) []string {
		if f, ok := flagsOf[sub]; ok {
			return f
		}
		out, err := exec.Command(bin, append(strings.Fields(sub), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("claudemesh %s --help: %v\n%s", sub, err, out)
		}
		for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
			flagsOf[sub] = append(flagsOf[sub], m[1])
		}
		return flagsOf[sub]
	}
	check := func(where, sub string, args []string) {
		t.Helper()
		known := flags(sub)
		for _, a := range args {
			name, _, _ := strings.Cut(a, "=")
			if strings.HasPrefix(name, "--") && !slices.Contains(known, name) {
				t.Errorf("%s: claudemesh %s has no flag %s (it has %v)", where, sub, name, known)
			}
		}
	}

	content := readBrokerFile(t, brokerUnitFile)
	execStart := strings.Fields(unitOptions(t, []byte(content))["Service"]["ExecStart"][0])
	check("ExecStart", "broker up", execStart[3:])
	_, alt := commentedExecStart(t, content)
	check("commented ExecStart", "broker up", alt[3:])
	c := readCompose(t)
	for _, name := range []string{"broker-1", "broker-2"} {
		check("compose "+name, "broker up", c.list(c.service(name), name, "command")[2:])
	}
	subs := []string{"broker mesh create", "broker invite create", "broker up", "join"}
	for _, argv := range readmeCommands(readBrokerFile(t, "README.md")) {
		line := strings.Join(argv[1:], " ")
		i := slices.IndexFunc(subs, func(s string) bool { return strings.HasPrefix(line, s+" ") })
		if i < 0 {
			t.Errorf("README runs `claudemesh %s`, not a known subcommand", line)
			continue
		}
		check("README `claudemesh "+line+"`", subs[i], argv[1:])
	}
	if len(flagsOf) < len(subs) {
		t.Errorf("the README shows %d of the subcommands %v", len(flagsOf), subs)
	}

	// The unit's command line, on a free port and a temp directory.
	dir := filepath.Join(t.TempDir(), "state")
	args := slices.Clone(execStart[1:])
	args[slices.Index(args, "--listen")+1] = "127.0.0.1:0"
	args[slices.Index(args, "--dir")+1] = dir
	cmd := exec.Command(bin, args...)
	var stderr brokerStderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
	listening := regexp.MustCompile(`broker listening on (\S+) `)
	var addr string
	if err := wait.Until(10*time.Second, "`broker listening on`", func() bool {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("broker exited during start-up: %v\n%s", err, stderr.String())
		default:
		}
		return false
	}); err != nil {
		t.Fatalf("%v:\n%s", err, stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || health["status"] != "ok" {
		t.Errorf("GET /health: %d %v %v", resp.StatusCode, health, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "broker.db")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("--dir holds no broker.db: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("broker exited with %v after SIGTERM, want 0\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("broker still running 10s after SIGTERM")
	}
}

// brokerStderr is a bytes.Buffer written by a child's stderr copier and
// read by the test.
type brokerStderr struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *brokerStderr) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *brokerStderr) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
