package integration

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/transport/join"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestProvisionAndJoin drives `broker mesh create`, `broker invite` and
// `join` as a user would, against the join endpoint served in this process
// over the same broker database the CLI provisions.
func TestProvisionAndJoin(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "broker")
		provisionFlow(t, []string{"--dir", dir}, broker.Options{Dir: dir})
	})
	t.Run("postgres", func(t *testing.T) {
		u := brokertest.PostgresURL(t)
		provisionFlow(t, []string{"--database-url", u}, broker.Options{DatabaseURL: u})
	})
}

func provisionFlow(t *testing.T, storeFlags []string, opts broker.Options) {
	ctx := context.Background()
	e := newEnv(t)
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, e, args...)
	}
	withStore := func(args ...string) []string { return append(args, storeFlags...) }

	r := cli(withStore("broker", "mesh", "create", "demo")...)
	if r.code != 0 || !regexp.MustCompile(`^created mesh demo \(id [0-9A-Z]{26}\)\n$`).MatchString(r.stdout) {
		t.Fatalf("mesh create: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := cli(withStore("broker", "mesh", "create", "demo")...); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second mesh create: exit %d, stderr %s; want 1 and 'already exists'", r.code, r.stderr)
	}
	if r := cli(withStore("broker", "mesh", "create", "Bad Slug")...); r.code != 2 {
		t.Errorf("bad slug: exit %d, stderr %s; want 2", r.code, r.stderr)
	}

	store, err := broker.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := httptest.NewServer(join.Handler(store, nil))
	defer srv.Close()
	mesh, err := store.MeshBySlug(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}

	invite := func(extra ...string) string {
		t.Helper()
		r := cli(withStore(append([]string{"broker", "invite", "demo", "--broker-url", srv.URL}, extra...)...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		link := lines[len(lines)-1]
		if _, err := join.ParseLink(link); r.code != 0 || err != nil || !strings.HasPrefix(link, srv.URL+"/join/") {
			t.Fatalf("broker invite: exit %d, %v\nstdout %q\nstderr %s", r.code, err, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "use") || !strings.Contains(r.stderr, "expires") {
			t.Errorf("broker invite stderr %q: want the uses and the expiry", r.stderr)
		}
		return link
	}
	inviteURL := invite()

	// config.json as the daemon leaves it on a fresh machine, plus a key of
	// the upstream CLI's.
	if err := os.WriteFile(filepath.Join(e.configDir, "config.json"), []byte(`{"meshes":[{"meshId":"local-mesh","memberId":"local-member",`+
		`"slug":"local","name":"local","pubkey":"`+strings.Repeat("ab", 32)+`","secretKey":"`+strings.Repeat("cd", 64)+`","brokerUrl":""}],`+
		`"upstream":{"theme":"dark","n":[1,2,3]}}`), 0o600); err != nil {
		t.Fatal(err)
	}

	r = cli("join", inviteURL, "--name", "alice")
	wantWS := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	m := regexp.MustCompile(`^joined mesh demo as alice \(key ([0-9a-f]{12})…, broker (\S+)\)\n`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[2] != wantWS {
		t.Fatalf("join: exit %d\nstdout %q\nstderr %s\nwant the joined line with broker %s", r.code, r.stdout, r.stderr, wantWS)
	}
	if !strings.Contains(r.stdout, "added beside the local mesh") || strings.Contains(r.stdout, "running daemon") {
		t.Errorf("join stdout %q: want the note that it was added beside the local mesh (and no daemon runs)", r.stdout)
	}

	paths := config.Paths{ConfigDir: e.configDir}
	members, err := paths.LoadMemberships()
	if err != nil || len(members) != 2 || members[0].Slug != "local" || members[1].Slug != "demo" {
		t.Fatalf("config.json memberships %+v, %v; want local then demo", members, err)
	}
	got := members[1]
	id, err := meshcrypto.ParseIdentity(got.SecretKey)
	if err != nil || id.PublicKeyHex() != got.Pubkey || !strings.HasPrefix(got.Pubkey, m[1]) {
		t.Errorf("recorded key pair does not match (pubkey %s, printed %s): %v", got.Pubkey, m[1], err)
	}
	member, err := store.MemberByPubkey(ctx, mesh.ID, got.Pubkey)
	if err != nil || member.ID != got.MemberID || member.DisplayName != "alice" || member.Revoked() {
		t.Errorf("broker member %+v, %v; want id %s named alice", member, err, got.MemberID)
	}
	if got.MeshID != mesh.ID || got.Name != "demo" || got.BrokerURL != wantWS || got.JoinedAt == "" {
		t.Errorf("recorded membership %+v; want mesh %s, broker %s", got, mesh.ID, wantWS)
	}
	raw := provisionConfigDoc(t, paths)
	if compactJSON(t, raw["upstream"]) != `{"n":[1,2,3],"theme":"dark"}` {
		t.Errorf("config.json lost an unrelated key: upstream = %s", raw["upstream"])
	}
	if fi, err := os.Stat(paths.ConfigFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode %v, %v; want 0600", fi.Mode(), err)
	}
	written, _ := os.ReadFile(paths.ConfigFile())

	// The invite had one use: a second join fails and says why.
	if r := cli("join", inviteURL, "--name", "bob"); r.code != 1 || !strings.Contains(r.stderr, "no uses left") {
		t.Errorf("join with a used-up invite: exit %d, stderr %q; want 1 and 'no uses left'", r.code, r.stderr)
	}
	// A new invite to a mesh already joined: refused, the key is not replaced.
	// (Under another name: the broker refuses a second "alice" itself.)
	if r := cli("join", invite(), "--name", "alice-again"); r.code != 1 || !strings.Contains(r.stderr, "already records mesh demo") {
		t.Errorf("join of a mesh already joined: exit %d, stderr %q; want 1 and 'already records mesh demo'", r.code, r.stderr)
	}
	if r := cli("join", expiredInviteVector(t), "--name", "late"); r.code != 12 || !strings.Contains(r.stderr, "invite expired") {
		t.Errorf("join with an expired invite: exit %d, stderr %q; want 12 and 'invite expired'", r.code, r.stderr)
	}
	if now, _ := os.ReadFile(paths.ConfigFile()); string(now) != string(written) {
		t.Errorf("a failed join changed config.json:\n%s", now)
	}

	for _, bad := range []string{"demo", "ftp://h/join/x", srv.URL + "/nojoin/x"} {
		if r := cli("join", bad); r.code != 10 || !strings.Contains(r.stderr, "not a claudemesh invite link") {
			t.Errorf("join %s: exit %d, stderr %q; want 10 and a word on the invite link", bad, r.code, r.stderr)
		}
	}
	srv.Close()
	if r := cli("join", invite(), "--name", "carol"); r.code != 1 || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("join with the broker down: exit %d, stderr %q; want 1 and 'unreachable'", r.code, r.stderr)
	}
}

// provisionConfigDoc reads config.json as its top-level keys.
func provisionConfigDoc(t *testing.T, paths config.Paths) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(paths.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
