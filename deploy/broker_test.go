package deploy

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The broker's deployment files (deploy/broker): a systemd system unit, a
// compose example of two replicas, its Dockerfile and the README. Nothing
// here renders them; these tests keep them consistent with each other and
// with the CLI.

const (
	brokerUnitFile   = "claudemesh-broker.service"
	brokerBinary     = "/usr/local/bin/claudemesh"
	brokerStateDir   = "/var/lib/claudemesh-broker"
	brokerUnitListen = "127.0.0.1:7900"
)

func readBrokerFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("broker", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// brokerFlag is the value following flag in args ("" when absent).
func brokerFlag(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// commentedExecStart is the PostgreSQL alternative the unit carries as a
// comment: its EnvironmentFile= and ExecStart= lines.
func commentedExecStart(t *testing.T, content string) (envFile string, argv []string) {
	t.Helper()
	for _, line := range strings.Split(content, "\n") {
		if v, ok := strings.CutPrefix(line, "#EnvironmentFile="); ok {
			envFile = v
		}
		if v, ok := strings.CutPrefix(line, "#ExecStart="); ok {
			argv = strings.Fields(v)
		}
	}
	if envFile == "" || argv == nil {
		t.Fatalf("%s lacks the commented PostgreSQL alternative (#EnvironmentFile= and #ExecStart=)", brokerUnitFile)
	}
	return envFile, argv
}

func TestBrokerUnitContent(t *testing.T) {
	content := readBrokerFile(t, brokerUnitFile)
	u := unitOptions(t, []byte(content))
	one := func(section, key string) string {
		t.Helper()
		v := u[section][key]
		if len(v) != 1 {
			t.Errorf("[%s] %s = %q, want exactly one", section, key, v)
			return ""
		}
		return v[0]
	}
	wantArgv := []string{brokerBinary, "broker", "up", "--listen", brokerUnitListen, "--dir", brokerStateDir}
	if got := strings.Fields(one("Service", "ExecStart")); !slices.Equal(got, wantArgv) {
		t.Errorf("ExecStart %q, want %q", got, wantArgv)
	}
	for _, kv := range []struct{ section, key, value string }{
		{"Service", "Type", "simple"},
		{"Service", "User", "claudemesh"},
		{"Service", "StateDirectory", "claudemesh-broker"},
		{"Service", "StateDirectoryMode", "0700"},
		{"Service", "Restart", "on-failure"},
		{"Service", "LimitNOFILE", "65536"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "ProtectHome", "yes"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "CapabilityBoundingSet", ""},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if got := one(kv.section, kv.key); got != kv.value {
			t.Errorf("[%s] %s = %q, want %q", kv.section, kv.key, got, kv.value)
		}
	}
	// --dir is the StateDirectory, the one writable path under
	// ProtectSystem=strict: no ReadWritePaths needed or wanted.
	if filepath.Join("/var/lib", one("Service", "StateDirectory")) != brokerStateDir {
		t.Errorf("StateDirectory=%s is not the --dir %s", one("Service", "StateDirectory"), brokerStateDir)
	}
	if rw := u["Service"]["ReadWritePaths"]; len(rw) > 0 {
		t.Errorf("ReadWritePaths=%q: StateDirectory= already makes %s writable", rw, brokerStateDir)
	}
	if _, ok := u["Service"]["EnvironmentFile"]; ok {
		t.Error("EnvironmentFile= is active; it belongs to the commented PostgreSQL alternative")
	}
	if host := strings.Split(brokerUnitListen, ":")[0]; host != "127.0.0.1" {
		t.Errorf("the unit listens on %s, want loopback behind a proxy", host)
	}

	envFile, argv := commentedExecStart(t, content)
	if !filepath.IsAbs(envFile) {
		t.Errorf("#EnvironmentFile=%s is not absolute", envFile)
	}
	if !slices.Equal(argv[:5], wantArgv[:5]) || brokerFlag(argv, "--dir") != "" {
		t.Errorf("commented ExecStart %q: want the same binary and --listen, without --dir", argv)
	}
	// ${VAR} (not $VAR) keeps each URL one argument.
	if brokerFlag(argv, "--database-url") != "${DATABASE_URL}" || brokerFlag(argv, "--redis-url") != "${REDIS_URL}" {
		t.Errorf("commented ExecStart %q: want --database-url ${DATABASE_URL} --redis-url ${REDIS_URL}", argv)
	}
	for _, v := range []string{"DATABASE_URL=postgres://", "PGPASSWORD=", "REDIS_URL=redis://"} {
		if !strings.Contains(content, "#   "+v) {
			t.Errorf("the unit's comment does not show the environment file line %s…", v)
		}
	}
}

// TestBrokerUnitVerify runs `systemd-analyze verify` (system mode) on the
// unit with ExecStart pointing at an existing executable and fails on any
// warning about the unit; a missing binary must fail, proving the check
// checks. `systemd-analyze security --offline` keeps the hardening from
// eroding.
func TestBrokerUnitVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not on PATH under CI=true (.ci/run installs systemd)")
		}
		t.Skip("systemd-analyze is not on PATH: the unit was checked by TestBrokerUnitContent only")
	}
	content := readBrokerFile(t, brokerUnitFile)
	if !strings.Contains(content, "\nExecStart="+brokerBinary+" ") {
		t.Fatalf("no ExecStart=%s line to rewrite", brokerBinary)
	}
	withBinary := func(t *testing.T, bin string) string {
		t.Helper()
		dir := t.TempDir()
		file := filepath.Join(dir, brokerUnitFile)
		rewritten := strings.ReplaceAll(content, "\nExecStart="+brokerBinary+" ", "\nExecStart="+bin+" ")
		if err := os.WriteFile(file, []byte(rewritten), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(analyze, args...)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	stubDir := t.TempDir()
	stub := filepath.Join(stubDir, "claudemesh")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := withBinary(t, stub)

	t.Run("verify", func(t *testing.T) {
		out, err := run("verify", file)
		if err != nil {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
		// verify exits 0 on warnings (an unknown key, a key in the wrong
		// section): any line about our unit is a failure.
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, brokerUnitFile) {
				t.Errorf("systemd-analyze verify warns: %s", line)
			}
		}
	})
	t.Run("missing binary fails", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-such", "claudemesh")
		out, err := run("verify", withBinary(t, missing))
		if err == nil || !strings.Contains(out, "no-such") {
			t.Fatalf("verify of the unit with a missing binary: err %v, output:\n%s", err, out)
		}
	})
	t.Run("security", func(t *testing.T) {
		// Exposure 0.0 (locked down) to 10.0; the unit scores about 1.1.
		out, err := run("security", "--offline=yes", "--threshold=25", "--no-pager", file)
		if err != nil && (strings.Contains(out, "unrecognized option") || strings.Contains(out, "Unknown option")) {
			t.Skipf("this systemd-analyze has no offline security check: %s", strings.TrimSpace(out))
		}
		if err != nil {
			t.Fatalf("systemd-analyze security: exposure above 2.5 or an error: %v\n%s", err, out)
		}
	})
}

// yamlLine is one significant line of a YAML file.
type yamlLine struct {
	indent int
	text   string
}

// yamlLines drops blank and comment lines and trailing comments (" #").
func yamlLines(t *testing.T, src string) []yamlLine {
	t.Helper()
	var out []yamlLine
	for i, raw := range strings.Split(src, "\n") {
		if strings.Contains(raw, "\t") {
			t.Errorf("compose.yaml:%d has a tab; YAML indents with spaces", i+1)
		}
		text := strings.TrimSpace(raw)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if j := strings.Index(text, " #"); j >= 0 {
			text = strings.TrimSpace(text[:j])
		}
		out = append(out, yamlLine{indent: len(raw) - len(strings.TrimLeft(raw, " ")), text: text})
	}
	return out
}

// yamlKey finds key at the top level of lines (their smallest indent) and
// returns its inline value and the lines nested under it.
func yamlKey(lines []yamlLine, key string) (value string, body []yamlLine, ok bool) {
	if len(lines) == 0 {
		return "", nil, false
	}
	top := lines[0].indent
	for _, l := range lines {
		top = min(top, l.indent)
	}
	for i, l := range lines {
		rest, found := strings.CutPrefix(l.text, key+":")
		if l.indent != top || !found || (rest != "" && rest[0] != ' ') {
			continue
		}
		j := i + 1
		for j < len(lines) && lines[j].indent > l.indent {
			j++
		}
		return strings.TrimSpace(rest), lines[i+1 : j], true
	}
	return "", nil, false
}

func yamlUnquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// yamlList reads a flow list written as JSON (["a", "b"]) or a block list.
func yamlList(t *testing.T, what, value string, body []yamlLine) []string {
	t.Helper()
	if strings.HasPrefix(value, "[") {
		var out []string
		if err := json.Unmarshal([]byte(value), &out); err != nil {
			t.Fatalf("%s: flow list %s: %v", what, value, err)
		}
		return out
	}
	var out []string
	for _, l := range body {
		if item, ok := strings.CutPrefix(l.text, "- "); ok && l.indent == body[0].indent {
			out = append(out, yamlUnquote(strings.TrimSpace(item)))
		}
	}
	return out
}

// composeFile is compose.yaml read structurally (no YAML library in the
// module): services with their `<<: *anchor` merges resolved.
type composeFile struct {
	t        *testing.T
	lines    []yamlLine
	services []yamlLine
}

func readCompose(t *testing.T) *composeFile {
	t.Helper()
	c := &composeFile{t: t, lines: yamlLines(t, readBrokerFile(t, "compose.yaml"))}
	_, services, ok := yamlKey(c.lines, "services")
	if !ok {
		t.Fatal("compose.yaml has no services")
	}
	c.services = services
	return c
}

// service returns the service's own lines, then those of the anchors it
// merges (so that yamlKey finds an override first).
func (c *composeFile) service(name string) []yamlLine {
	c.t.Helper()
	_, body, ok := yamlKey(c.services, name)
	if !ok {
		c.t.Fatalf("compose.yaml has no service %s", name)
	}
	merged := slices.Clone(body)
	if ref, _, ok := yamlKey(body, "<<"); ok {
		anchor, found := strings.CutPrefix(ref, "*")
		if !found {
			c.t.Fatalf("service %s merges %q, want *anchor", name, ref)
		}
		var anchorBody []yamlLine
		for i, l := range c.lines {
			if strings.HasSuffix(l.text, ": &"+anchor) {
				j := i + 1
				for j < len(c.lines) && c.lines[j].indent > l.indent {
					j++
				}
				anchorBody = c.lines[i+1 : j]
			}
		}
		if anchorBody == nil {
			c.t.Fatalf("service %s merges *%s, which is not defined", name, anchor)
		}
		// Re-indent the anchor's lines to the service's level.
		shift := body[0].indent - anchorBody[0].indent
		for _, l := range anchorBody {
			merged = append(merged, yamlLine{indent: l.indent + shift, text: l.text})
		}
	}
	return merged
}

func (c *composeFile) get(svc []yamlLine, what string, path ...string) (string, []yamlLine) {
	c.t.Helper()
	value, body := "", svc
	for _, key := range path {
		var ok bool
		if value, body, ok = yamlKey(body, key); !ok {
			c.t.Fatalf("%s: no %s", what, strings.Join(path, "."))
		}
	}
	return yamlUnquote(value), body
}

func (c *composeFile) list(svc []yamlLine, what string, path ...string) []string {
	c.t.Helper()
	value, body := c.get(svc, what, path...)
	return yamlList(c.t, what+" "+strings.Join(path, "."), value, body)
}

func TestBrokerCompose(t *testing.T) {
	c := readCompose(t)
	pg, redis := c.service("postgres"), c.service("redis")
	if img, _ := c.get(pg, "postgres", "image"); !regexp.MustCompile(`^postgres:15(\.|-|$)`).MatchString(img) {
		t.Errorf("postgres image %q, want postgres:15", img)
	}
	if img, _ := c.get(redis, "redis", "image"); !regexp.MustCompile(`^redis:7(\.|-|$)`).MatchString(img) {
		t.Errorf("redis image %q, want redis:7", img)
	}
	if test := strings.Join(c.list(pg, "postgres", "healthcheck", "test"), " "); !strings.Contains(test, "pg_isready") {
		t.Errorf("postgres healthcheck %q, want pg_isready", test)
	}
	if test := strings.Join(c.list(redis, "redis", "healthcheck", "test"), " "); !strings.Contains(test, "redis-cli") || !strings.Contains(test, "ping") {
		t.Errorf("redis healthcheck %q, want redis-cli ping", test)
	}
	pgUser, _ := c.get(pg, "postgres", "environment", "POSTGRES_USER")
	pgDB, _ := c.get(pg, "postgres", "environment", "POSTGRES_DB")
	pgPassword, _ := c.get(pg, "postgres", "environment", "POSTGRES_PASSWORD")

	var dbURLs, redisURLs []string
	for _, tc := range []struct{ name, port string }{{"broker-1", "7901"}, {"broker-2", "7902"}} {
		svc := c.service(tc.name)
		args := c.list(svc, tc.name, "command")
		if len(args) < 2 || args[0] != "broker" || args[1] != "up" {
			t.Errorf("%s command %q, want broker up …", tc.name, args)
		}
		if l := brokerFlag(args, "--listen"); l != "0.0.0.0:7900" {
			t.Errorf("%s --listen %q, want 0.0.0.0:7900", tc.name, l)
		}
		if brokerFlag(args, "--dir") != "" {
			t.Errorf("%s uses --dir: replicas must share PostgreSQL", tc.name)
		}
		dbURLs = append(dbURLs, brokerFlag(args, "--database-url"))
		redisURLs = append(redisURLs, brokerFlag(args, "--redis-url"))

		ports := c.list(svc, tc.name, "ports")
		if len(ports) != 1 || !strings.HasSuffix(ports[0], ":"+tc.port+":7900") && ports[0] != tc.port+":7900" {
			t.Errorf("%s ports %q, want %s published to 7900", tc.name, ports, tc.port)
		}
		test := strings.Join(c.list(svc, tc.name, "healthcheck", "test"), " ")
		if !strings.Contains(test, "http://127.0.0.1:7900/health") {
			t.Errorf("%s healthcheck %q, want GET http://127.0.0.1:7900/health", tc.name, test)
		}
		for _, dep := range []string{"postgres", "redis"} {
			if cond, _ := c.get(svc, tc.name, "depends_on", dep, "condition"); cond != "service_healthy" {
				t.Errorf("%s depends_on %s condition %q, want service_healthy", tc.name, dep, cond)
			}
		}
		if pw, _ := c.get(svc, tc.name, "environment", "PGPASSWORD"); pw != pgPassword {
			t.Errorf("%s PGPASSWORD %q, want postgres's POSTGRES_PASSWORD %q", tc.name, pw, pgPassword)
		}
		if build, _ := c.get(svc, tc.name, "build", "dockerfile"); build != "deploy/broker/Dockerfile" {
			t.Errorf("%s builds %q, want deploy/broker/Dockerfile", tc.name, build)
		}
		if ctx, _ := c.get(svc, tc.name, "build", "context"); filepath.Clean(filepath.Join("broker", ctx)) != ".." {
			t.Errorf("%s build context %q, want the repository root (../..)", tc.name, ctx)
		}
	}
	if dbURLs[0] == "" || dbURLs[0] != dbURLs[1] {
		t.Errorf("the replicas' --database-url differ or are missing: %q", dbURLs)
	}
	if redisURLs[0] == "" || redisURLs[0] != redisURLs[1] {
		t.Errorf("the replicas' --redis-url differ or are missing: %q", redisURLs)
	}
	db, err := url.Parse(dbURLs[0])
	if err != nil || db.Scheme != "postgres" || db.Hostname() != "postgres" || db.User.Username() != pgUser || strings.TrimPrefix(db.Path, "/") != pgDB {
		t.Errorf("--database-url %q: want postgres://%s@postgres/%s (the postgres service's user and database); %v", dbURLs[0], pgUser, pgDB, err)
	}
	if _, has := db.User.Password(); has {
		t.Errorf("--database-url %q carries a password; use PGPASSWORD", dbURLs[0])
	}
	if r, err := url.Parse(redisURLs[0]); err != nil || r.Scheme != "redis" || r.Hostname() != "redis" {
		t.Errorf("--redis-url %q: want redis://redis…; %v", redisURLs[0], err)
	}
}

func TestBrokerDockerfile(t *testing.T) {
	df := readBrokerFile(t, "Dockerfile")
	var froms []string
	for _, line := range strings.Split(df, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "FROM" {
			froms = append(froms, strings.Join(f[1:], " "))
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:1.26") || !strings.HasSuffix(froms[0], " AS build") {
		t.Errorf("stages %q, want golang:1.26 AS build, then the runtime", froms)
	}
	if len(froms) == 2 && !regexp.MustCompile(`^(gcr\.io/distroless/|debian:\S*-slim)`).MatchString(froms[1]) {
		t.Errorf("runtime stage %q, want distroless or debian-slim", froms[1])
	}
	for _, want := range []string{"CGO_ENABLED=0 go build", "./cmd/claudemesh", "COPY --from=build", `ENTRYPOINT ["` + brokerBinary + `"]`, "\nUSER claudemesh\n", "EXPOSE 7900", "STOPSIGNAL SIGTERM"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The compose healthcheck runs curl in this image.
	if !regexp.MustCompile(`apt-get install[^\n]*\bcurl\b`).MatchString(df) {
		t.Error("Dockerfile does not install curl, which the compose healthcheck runs")
	}
	// -X main.version needs the variable to exist.
	if src, err := os.ReadFile(filepath.Join("..", "cmd", "claudemesh", "main.go")); err != nil || !strings.Contains(string(src), "\nvar version = ") {
		t.Errorf("cmd/claudemesh/main.go has no `var version` for -X main.version (%v)", err)
	}
	ignore := readBrokerFile(t, "Dockerfile.dockerignore")
	for _, must := range []string{"go.mod", "go.sum", "cmd", "deploy", "persistence"} {
		for _, l := range strings.Split(ignore, "\n") {
			if strings.TrimPrefix(strings.TrimSpace(l), "/") == must {
				t.Errorf("Dockerfile.dockerignore excludes %s, which the build needs", must)
			}
		}
	}
}
