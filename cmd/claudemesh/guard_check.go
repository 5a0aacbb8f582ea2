package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/pathglob"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// guardCheckCmd is what the hooks run, in the repository: the paths of the
// commit (staged) or of the push (the commits it sends), asked of the
// local daemon as the committing session — the session token the
// environment of an agent carries (`claudemesh launch`), never a name —
// or, outside any session, as the daemon's member, whom every session's
// reservations bind.
type guardCheckCmd struct {
	Hook    string `arg:"" enum:"pre-commit,pre-push" help:"The hook that runs it."`
	Warn    bool   `help:"Warn instead of refusing."`
	Offline string `enum:"allow,refuse" default:"allow" help:"When the daemon cannot answer: allow or refuse."`
}

// guardTimeout bounds the whole check: a commit waits no longer for it.
const guardTimeout = 10 * time.Second

func (c *guardCheckCmd) Run() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	repo, err := gitrepo.ID(context.Background(), dir)
	if err != nil { // no commit yet: nothing can be reserved in it
		return nil
	}
	var paths []string
	if c.Hook == "pre-commit" {
		paths, err = gitPaths("diff", "--cached", "--name-only", "-z", "--no-renames")
	} else {
		paths, err = pushedPaths(os.Stdin)
	}
	if err != nil {
		return fmt.Errorf("claudemesh guard: list the paths to check: %w", err)
	}
	if len(paths) == 0 {
		return nil
	}
	conflicts, unchecked, err := askGuard(repo, paths)
	if err != nil {
		return c.cannotAsk(err)
	}
	return c.judge(conflicts, unchecked)
}

// cannotAsk lets the commit through with a warning, or refuses it when
// the guard was installed to.
func (c *guardCheckCmd) cannotAsk(err error) error {
	verb := strings.TrimPrefix(c.Hook, "pre-")
	why, fix := err.Error(), "start it (claudemesh daemon up)"
	if s := sessionRefusal(err); s != "" { // the committing shell's session is gone
		why, fix = s, fmt.Sprintf("%s in a live session, or with %s unset", verb, mcpserver.SessionSource())
	}
	if c.Offline == "refuse" {
		return &exitError{code: 3, err: fmt.Errorf("guard: the daemon could not answer (%s), and this guard refuses then: "+
			"%s, or skip the check with git %s --no-verify", why, fix, verb)}
	}
	fmt.Fprintf(os.Stderr, "claudemesh guard: warning: the daemon could not answer (%s); %s not checked against reservations\n",
		printableLines(why), verb)
	return nil
}

// judge says what others reserved exclusively, and which paths could not
// be checked while exclusive reservations stand: a refusal, or warnings.
func (c *guardCheckCmd) judge(conflicts []messages.PathConflict, unchecked []string) error {
	if len(conflicts) == 0 && len(unchecked) == 0 {
		return nil
	}
	var b strings.Builder
	for _, cf := range conflicts {
		fmt.Fprintf(&b, "\n  %s is reserved exclusively by %s (pattern %s, fence token %d, until %s)", printable(cf.Path),
			printable(cf.HolderName), printable(cf.Pattern), cf.FenceToken, stamp(cf.ExpiresAt))
	}
	for _, p := range unchecked {
		fmt.Fprintf(&b, "\n  %s cannot be checked against the reservations standing in this repository (a pattern names "+
			"only paths of UTF-8, at most %d bytes): rename it", printable(p), pathglob.MaxPathBytes)
	}
	what, why := strings.TrimPrefix(c.Hook, "pre-"), "touches files another session reserved"
	if len(conflicts) == 0 {
		why = "touches files the guard cannot check"
	}
	if c.Warn {
		fmt.Fprintf(os.Stderr, "claudemesh guard: warning: this %s %s:%s\n", what, why, b.String())
		return nil
	}
	return &exitError{code: 3, err: fmt.Errorf("guard: %s refused: it %s:%s\n"+
		"Ask the holder (claudemesh send <name> …), wait for the reservation to end (claudemesh reservations), "+
		"or skip the check with git %s --no-verify", what, why, b.String(), what)}
}

// askGuard asks the daemon, as the session the environment names (if
// any), in parts the daemon takes. A path git allows and a pattern cannot
// name (not UTF-8, too long) cannot be checked: it is returned as
// unchecked while any exclusive reservation stands in the repository,
// since one of them may be meant to cover it.
func askGuard(repo string, paths []string) (conflicts []messages.PathConflict, unchecked []string, err error) {
	var checkable []string
	for _, p := range paths {
		if pathglob.CheckPath(p) != nil {
			unchecked = append(unchecked, p)
		} else {
			checkable = append(checkable, p)
		}
	}
	cfg, err := config.ResolvePaths()
	if err != nil {
		return nil, nil, err
	}
	tok, err := mcpserver.SessionToken()
	if err != nil {
		return nil, nil, err
	}
	client := ipc.NewClient(cfg.Socket()).AsSession(tok)
	ctx, cancel := context.WithTimeout(context.Background(), guardTimeout)
	defer cancel()
	for len(checkable) > 0 {
		n, size := 0, 0
		for n < len(checkable) && n < messages.MaxCheckPaths && size+len(checkable[n]) <= messages.MaxCheckPathBytes {
			size += len(checkable[n])
			n++
		}
		res, err := client.CheckPaths(ctx, &messages.CheckPathsRequest{Repo: repo, Paths: checkable[:n]})
		if err != nil {
			return nil, nil, err
		}
		conflicts, checkable = append(conflicts, res.Conflicts...), checkable[n:]
	}
	if len(unchecked) > 0 {
		list, err := client.Reservations(ctx, "", repo)
		if err != nil {
			return nil, nil, err
		}
		if !slices.ContainsFunc(list.Reservations, func(r messages.ReservationInfo) bool { return r.Exclusive }) {
			unchecked = nil
		}
	}
	return conflicts, unchecked, nil
}

// gitPaths runs git with args and returns the NUL-separated paths it
// prints, each once.
func gitPaths(args ...string) ([]string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var paths []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p = strings.Trim(p, "\n"); p != "" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// pushedPaths reads pre-push's input (<local ref> <local sha> <remote
// ref> <remote sha>, a line per ref) and returns the paths the pushed
// commits change: those between the remote's commit and ours, or, for a
// new branch (or a remote commit not here), those of our commits no remote
// branch has. A deletion changes none.
func pushedPaths(in io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || strings.Trim(f[1], "0") == "" {
			continue
		}
		paths, err := gitPaths("log", "--format=", "--name-only", "-z", "--no-renames", f[3]+".."+f[1])
		if strings.Trim(f[3], "0") == "" || err != nil {
			paths, err = gitPaths("log", "--format=", "--name-only", "-z", "--no-renames", f[1], "--not", "--remotes")
		}
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, sc.Err()
}
