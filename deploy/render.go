package deploy

import (
	"bytes"
	"embed"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"
)

// Service names. One daemon per OS user serves every mesh, so there is one
// unit per user and no per-mesh template.
const (
	// SystemdUnit is the systemd user unit's name.
	SystemdUnit = "claudemesh-daemon.service"
	// LaunchdLabel is the launchd agent's label; its plist is Label + ".plist".
	LaunchdLabel = "com.claudemesh.daemon"
)

// ErrBadPath: a path that cannot be written into a unit file or a plist
// as it is (relative, control characters, invalid UTF-8, or characters
// systemd refuses in an executable path).
var ErrBadPath = errors.New("unusable path")

// DaemonArgs are the arguments the service passes to the binary: the
// daemon in the foreground, as every supervisor needs it.
var DaemonArgs = []string{"daemon", "up", "--foreground"}

//go:embed templates/claudemesh-daemon.service.tmpl templates/com.claudemesh.daemon.plist.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").
	Funcs(template.FuncMap{"xml": xmlEscape}).
	ParseFS(templateFS, "templates/*.tmpl"))

// EnvVar is one variable the service sets for the daemon.
type EnvVar struct {
	Name, Value string
}

// Unit is what the systemd unit and the launchd plist are rendered from.
type Unit struct {
	// Binary is the absolute path of the claudemesh executable.
	Binary string
	// Environment: CLAUDEMESH_DAEMON_DIR and CLAUDEMESH_CONFIG_DIR when the
	// installing environment set them, as absolute paths.
	Environment []EnvVar
	// LogFile receives the daemon's stdout and stderr under launchd
	// (systemd sends them to journald).
	LogFile string
	// WorkingDirectory is the launchd job's working directory (the home
	// directory, which is what systemd gives a user unit).
	WorkingDirectory string
}

// RenderSystemd renders the systemd user unit.
func RenderSystemd(u Unit) ([]byte, error) {
	if err := checkPath("binary", u.Binary); err != nil {
		return nil, err
	}
	if strings.ContainsAny(u.Binary, "\"'\\$") {
		// systemd refuses an executable path with quotes or backslashes
		// ("Executable name contains special characters"), and does not
		// expand "$" in the path while it does in argv[0].
		return nil, fmt.Errorf("%w: binary path %q contains a quote, backslash or '$', which systemd cannot run; install the binary elsewhere (or pass --binary)", ErrBadPath, u.Binary)
	}
	exec := []string{systemdQuote(u.Binary)}
	for _, a := range DaemonArgs {
		exec = append(exec, systemdQuote(a))
	}
	var env []string
	for _, e := range u.Environment {
		if err := checkPath(e.Name, e.Value); err != nil {
			return nil, err
		}
		// Environment= takes C escapes and specifiers but expands no
		// variables: quote the whole assignment.
		env = append(env, `"`+systemdEscape(e.Name+"="+e.Value)+`"`)
	}
	return render("claudemesh-daemon.service.tmpl", map[string]any{
		"Unit":        SystemdUnit,
		"ExecStart":   strings.Join(exec, " "),
		"Environment": env,
	})
}

// RenderLaunchd renders the launchd agent's property list.
func RenderLaunchd(u Unit) ([]byte, error) {
	for _, p := range [][2]string{{"binary", u.Binary}, {"log file", u.LogFile}, {"working directory", u.WorkingDirectory}} {
		if err := checkPath(p[0], p[1]); err != nil {
			return nil, err
		}
	}
	for _, e := range u.Environment {
		if err := checkPath(e.Name, e.Value); err != nil {
			return nil, err
		}
	}
	return render("com.claudemesh.daemon.plist.tmpl", map[string]any{
		"Label":            LaunchdLabel,
		"Args":             append([]string{u.Binary}, DaemonArgs...),
		"WorkingDirectory": u.WorkingDirectory,
		"LogFile":          u.LogFile,
		"Environment":      u.Environment,
	})
}

func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checkPath accepts an absolute, clean path of printable UTF-8: anything
// else cannot be written into a unit file or a plist without changing it.
func checkPath(what, p string) error {
	switch {
	case !filepath.IsAbs(p):
		return fmt.Errorf("%w: %s path %q is not absolute", ErrBadPath, what, p)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: %s path %q is not valid UTF-8", ErrBadPath, what, p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s path %q contains a control character", ErrBadPath, what, p)
	}
	return nil
}

// systemdQuote quotes one ExecStart= word: "%" doubles (specifiers), and a
// word with white space, quotes, backslashes or ";" is double-quoted with
// C escapes.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return strings.ReplaceAll(s, "%", "%%")
	}
	return `"` + systemdEscape(s) + `"`
}

// systemdEscape escapes text for the inside of a double-quoted systemd
// value.
func systemdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, `%`, `%%`).Replace(s)
}

// xmlEscape escapes character data and attribute values.
func xmlEscape(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}
