package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Kinds of environment in which install-service refuses to install a
// persistent service unless forced.
const (
	KindCI        = "ci"
	KindContainer = "container"
	KindRoot      = "root"
)

// CIEnvVars are the variables whose presence (a value other than empty,
// "0", "false" or "no") marks a CI runner (spec §2.1, plus the common
// runners the spec's "…" stands for).
var CIEnvVars = []string{
	"CI",
	"CONTINUOUS_INTEGRATION",
	"GITHUB_ACTIONS",
	"GITLAB_CI",
	"BUILDKITE",
	"CIRCLECI",
	"JENKINS_URL",
	"TRAVIS",
	"TF_BUILD",
	"TEAMCITY_VERSION",
	"BITBUCKET_BUILD_NUMBER",
	"DRONE",
	"APPVEYOR",
	"CODEBUILD_BUILD_ID",
}

// ContainerEnvVars mark a container (spec A34 and §16.3): Kubernetes, the
// `container` variable that podman, LXC and systemd-nspawn set, and RunPod
// (a Docker-based pod).
var ContainerEnvVars = []string{
	"KUBERNETES_SERVICE_HOST",
	"container",
	"RUNPOD_POD_ID",
}

// containerFiles are the marker files container runtimes create.
var containerFiles = []string{"/.dockerenv", "/run/.containerenv"}

// cgroupContainer matches a container runtime in /proc/1/cgroup (A34). On
// cgroup v2 inside a container it often reads only "0::/", which is why the
// marker files and variables are checked too.
var cgroupContainer = regexp.MustCompile(`docker|kubepods|containerd|libpod`)

// Probe is what Detect looks at; SystemProbe probes the running process.
// Leave Getenv nil and Root empty to skip them, and set EUID to -1 when it
// is unknown (0 is root).
type Probe struct {
	// Getenv reads an environment variable ("" when unset).
	Getenv func(string) string
	// Root is the directory the filesystem markers are looked up under: "/"
	// for the real system, a temp directory in tests, "" to skip them.
	Root string
	// EUID is the effective user id; 0 means root. Negative: unknown.
	EUID int
}

// SystemProbe probes this process: its environment, "/" and its euid.
func SystemProbe() Probe {
	return Probe{Getenv: os.Getenv, Root: "/", EUID: os.Geteuid()}
}

// Finding is one reason not to install a persistent service.
type Finding struct {
	Kind   string `json:"kind"`   // KindCI, KindContainer or KindRoot
	Signal string `json:"signal"` // what was seen, e.g. "CI=true" or "/.dockerenv exists"
}

func (f Finding) String() string {
	switch f.Kind {
	case KindCI:
		return "CI environment (" + f.Signal + ")"
	case KindContainer:
		return "container (" + f.Signal + ")"
	case KindRoot:
		return "running as root (" + f.Signal + ")"
	}
	return f.Kind + " (" + f.Signal + ")"
}

// Detect returns every CI, container and root signal p shows, in a fixed
// order; none means a persistent service is appropriate.
func Detect(p Probe) []Finding {
	var out []Finding
	if p.Getenv != nil {
		for _, name := range CIEnvVars {
			if v := p.Getenv(name); truthy(v) {
				out = append(out, Finding{KindCI, name + "=" + v})
			}
		}
		for _, name := range ContainerEnvVars {
			if v := p.Getenv(name); v != "" {
				out = append(out, Finding{KindContainer, name + "=" + v})
			}
		}
	}
	if p.Root != "" {
		for _, f := range containerFiles {
			if _, err := os.Lstat(filepath.Join(p.Root, f)); err == nil {
				out = append(out, Finding{KindContainer, f + " exists"})
			}
		}
		if b, err := os.ReadFile(filepath.Join(p.Root, "/proc/1/cgroup")); err == nil {
			if m := cgroupContainer.Find(b); m != nil {
				out = append(out, Finding{KindContainer, "/proc/1/cgroup mentions " + string(m)})
			}
		}
	}
	if p.EUID == 0 {
		out = append(out, Finding{KindRoot, "euid 0"})
	}
	return out
}

// truthy: set to anything but an explicit "off".
func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// RefusedError is install-service's refusal; the CLI maps it to exit 2.
type RefusedError struct {
	Findings []Finding
}

func (e *RefusedError) Error() string {
	reasons := make([]string, len(e.Findings))
	onlyRoot := true
	for i, f := range e.Findings {
		reasons[i] = f.String()
		onlyRoot = onlyRoot && f.Kind == KindRoot
	}
	why := "a persistent service belongs on an operator-owned host, not on an ephemeral CI runner or in a container; run `claudemesh daemon up` for this session instead"
	if onlyRoot {
		why = "the service is installed for the user who runs this command; run it as that user, without sudo"
	}
	return fmt.Sprintf("refusing to install a persistent service: %s: %s (pass --force to install anyway)", strings.Join(reasons, ", "), why)
}

// CheckInstall returns a *RefusedError when p shows CI, a container or
// root, unless force is set.
func CheckInstall(p Probe, force bool) error {
	if force {
		return nil
	}
	if f := Detect(p); len(f) > 0 {
		return &RefusedError{Findings: f}
	}
	return nil
}
