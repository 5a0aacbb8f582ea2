package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envFunc(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// fakeRoot is a directory with the given files (path -> content).
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDetect(t *testing.T) {
	hostCgroup := map[string]string{"/proc/1/cgroup": "0::/init.scope\n"}
	type tc struct {
		name   string
		env    []string
		files  map[string]string
		euid   int
		kind   string // "" = allowed
		signal string
	}
	tests := []tc{
		{name: "bare host", files: hostCgroup, euid: 1000},
		{name: "cgroup v2 in a container shows only 0::/", files: map[string]string{"/proc/1/cgroup": "0::/\n"}, euid: 1000},
		{name: "CI=false is not CI", env: []string{"CI", "false"}, euid: 1000},
		{name: "CI=0 is not CI", env: []string{"CI", "0"}, euid: 1000},
		{name: "unrelated variable", env: []string{"CONTAINER_NAME", "x", "HOME", "/root"}, euid: 1000},
		{name: "unknown euid", euid: -1},
	}
	for _, v := range CIEnvVars {
		tests = append(tests, tc{name: v, env: []string{v, "true"}, euid: 1000, kind: KindCI, signal: v + "=true"})
	}
	tests = append(tests,
		tc{name: "CI=1", env: []string{"CI", "1"}, euid: 1000, kind: KindCI, signal: "CI=1"},
		tc{name: "JENKINS_URL", env: []string{"JENKINS_URL", "https://ci.example/"}, euid: 1000, kind: KindCI, signal: "JENKINS_URL=https://ci.example/"},
		tc{name: "KUBERNETES_SERVICE_HOST", env: []string{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, euid: 1000, kind: KindContainer, signal: "KUBERNETES_SERVICE_HOST=10.0.0.1"},
		tc{name: "container=podman", env: []string{"container", "podman"}, euid: 1000, kind: KindContainer, signal: "container=podman"},
		tc{name: "RUNPOD_POD_ID", env: []string{"RUNPOD_POD_ID", "abc"}, euid: 1000, kind: KindContainer, signal: "RUNPOD_POD_ID=abc"},
		tc{name: "/.dockerenv", files: map[string]string{"/.dockerenv": ""}, euid: 1000, kind: KindContainer, signal: "/.dockerenv exists"},
		tc{name: "/run/.containerenv", files: map[string]string{"/run/.containerenv": ""}, euid: 1000, kind: KindContainer, signal: "/run/.containerenv exists"},
		tc{name: "root", files: hostCgroup, euid: 0, kind: KindRoot, signal: "euid 0"},
	)
	for _, word := range []string{"docker", "kubepods", "containerd", "libpod"} {
		tests = append(tests, tc{name: "cgroup " + word, euid: 1000, kind: KindContainer, signal: "/proc/1/cgroup mentions " + word,
			files: map[string]string{"/proc/1/cgroup": "12:pids:/" + word + "/0123abcd\n0::/\n"}})
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Probe{Getenv: envFunc(tc.env...), Root: fakeRoot(t, tc.files), EUID: tc.euid}
			found := Detect(p)
			err := CheckInstall(p, false)
			if tc.kind == "" {
				if len(found) != 0 || err != nil {
					t.Fatalf("Detect = %v, CheckInstall = %v; want nothing", found, err)
				}
				return
			}
			if want := (Finding{tc.kind, tc.signal}); len(found) != 1 || found[0] != want {
				t.Fatalf("Detect = %v, want [%v]", found, want)
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("CheckInstall = %v, want a *RefusedError", err)
			}
			for _, s := range []string{tc.signal, "--force"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q does not name %q", err, s)
				}
			}
			if err := CheckInstall(p, true); err != nil {
				t.Errorf("CheckInstall with force = %v, want nil", err)
			}
		})
	}
}

func TestDetectReportsEverySignal(t *testing.T) {
	p := Probe{
		Getenv: envFunc("CI", "true", "GITHUB_ACTIONS", "true", "KUBERNETES_SERVICE_HOST", "10.0.0.1"),
		Root:   fakeRoot(t, map[string]string{"/.dockerenv": ""}),
		EUID:   0,
	}
	got := Detect(p)
	want := []Finding{
		{KindCI, "CI=true"}, {KindCI, "GITHUB_ACTIONS=true"},
		{KindContainer, "KUBERNETES_SERVICE_HOST=10.0.0.1"}, {KindContainer, "/.dockerenv exists"},
		{KindRoot, "euid 0"},
	}
	if len(got) != len(want) {
		t.Fatalf("Detect = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("finding %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestZeroProbeDetectsNothing(t *testing.T) {
	if f := Detect(Probe{EUID: -1}); len(f) != 0 {
		t.Fatalf("Detect(empty probe) = %v", f)
	}
}
