package hookcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// What a session should know as it starts, handed to Claude Code as the
// SessionStart hook's hookSpecificOutput.additionalContext: its unread
// messages, the file reservations and locks it holds, and who else holds
// reservations in the repository it works in. The receiver asks the
// daemon as the session (its token from sessions.json, which the daemon
// writes), or, for a session not registered yet, as the machine; all of
// it within startContextTimeout. A daemon that is down, slow or refuses
// gives no context, never a failed hook; nothing to tell prints nothing.

// startContextTimeout bounds what SessionStart asks: Claude Code waits for
// the hook at every start, resume, /clear and compaction.
const startContextTimeout = time.Second

const (
	maxListed  = 8   // reservations or locks named of each kind
	unreadPage = 100 // unread messages counted ("more than" past it)
)

// startOutput is a SessionStart hook's answer in Claude Code's format.
type startOutput struct {
	HookSpecificOutput startHookOutput `json:"hookSpecificOutput"`
}

type startHookOutput struct {
	HookEventName     string `json:"hookEventName"`
	AdditionalContext string `json:"additionalContext"`
}

// writeStartContext prints the context of the session a SessionStart row
// names, if there is any to tell.
func writeStartContext(stdout io.Writer, paths config.Paths, row hookevent.Row) {
	p, err := hookevent.Decode(row.Payload)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), startContextTimeout)
	defer cancel()
	text := gatherStartContext(ctx, paths, row.SessionID, p).text()
	if text == "" {
		return
	}
	if b, err := json.Marshal(&startOutput{startHookOutput{HookEventName: "SessionStart", AdditionalContext: text}}); err == nil {
		_, _ = stdout.Write(append(b, '\n'))
	}
}

// startContext is what the daemon told of a starting session.
type startContext struct {
	you        *messages.SessionInfo // nil: the daemon has no such session yet
	repo       string                // the repository it works in ("": none)
	unread     int
	moreUnread bool
	held       []messages.ReservationInfo // the session's, in every repository
	locks      []messages.LockInfo        // the session's
	others     []messages.ReservationInfo // others', in repo
}

// gatherStartContext asks the daemon what session id (whose hook payload
// is p) should know; whatever fails is left out.
func gatherStartContext(ctx context.Context, paths config.Paths, id string, p *hookevent.Payload) *startContext {
	c := &startContext{}
	repo := make(chan string, 1)
	go func() {
		r := ""
		if p.Cwd != "" {
			r, _ = gitrepo.ID(ctx, p.Cwd)
		}
		repo <- r
	}()
	client := ipc.NewClient(paths.Socket())
	rec, ok := startingSession(paths, id, p)
	if !ok { // not registered yet: it holds nothing, and no message can have reached it
		if c.repo = <-repo; c.repo != "" {
			if list, err := client.Reservations(ctx, p.Mesh, c.repo); err == nil {
				c.others = list.Reservations
			}
		}
		return c
	}
	c.askAsSession(ctx, client.AsSession(rec.Token), repo)
	return c
}

// askAsSession asks as the session what it has and holds, and others'
// reservations in the repository repo names once git has told it.
func (c *startContext) askAsSession(ctx context.Context, as *ipc.Client, repo <-chan string) {
	me, err := as.SessionMe(ctx)
	if err != nil {
		return
	}
	c.you = me
	var reservations *messages.ReservationList
	var locks *messages.LockList
	var wg sync.WaitGroup
	wg.Go(func() {
		q := url.Values{"unread_only": {"true"}, "mark_seen": {"false"}, "limit": {strconv.Itoa(unreadPage)}}
		if page, err := as.Inbox(ctx, q); err == nil {
			c.unread, c.moreUnread = len(page.Items), page.Next != ""
		}
	})
	wg.Go(func() { reservations, _ = as.Reservations(ctx, "", "") })
	wg.Go(func() { locks, _ = as.Locks(ctx, "", "") })
	c.repo = <-repo
	wg.Wait()
	mine := me.Presence.SessionPubkey
	if reservations != nil {
		for _, r := range reservations.Reservations {
			switch {
			case r.Holder == mine:
				c.held = append(c.held, r)
			case c.repo != "" && r.Repo == c.repo:
				c.others = append(c.others, r)
			}
		}
	}
	if locks != nil {
		for _, l := range locks.Locks {
			if l.Holder == mine {
				c.locks = append(c.locks, l)
			}
		}
	}
}

// startingSession is the registered session a SessionStart belongs to, as
// sessions.json has it: the one of its id (on its mesh, when several), or
// the one the id is an alias of, or — at a /clear, before the daemon has
// made the new id an alias — the session the agent's process goes on as
// (config.ContinuedSession, as the daemon's hooks decide).
func startingSession(paths config.Paths, id string, p *hookevent.Payload) (config.SessionRecord, bool) {
	recs, err := paths.ReadSessions()
	if err != nil {
		return config.SessionRecord{}, false
	}
	var found *config.SessionRecord
	for i, r := range recs {
		if (r.SessionID == id || slices.Contains(r.Aliases, id)) && (found == nil || r.Mesh == p.Mesh) {
			found = &recs[i]
		}
	}
	if found != nil {
		return *found, true
	}
	if p.Kind == "clear" {
		return config.ContinuedSession(recs, p.PID)
	}
	return config.SessionRecord{}, false
}

// text is the context in a few lines for the agent ("": nothing to tell).
func (c *startContext) text() string {
	if c.unread == 0 && len(c.held) == 0 && len(c.locks) == 0 && len(c.others) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("claudemesh")
	if c.you != nil {
		fmt.Fprintf(&b, ": you are %s on mesh %s", c.you.DisplayName, c.you.Mesh)
	}
	b.WriteString(".\n")
	if c.unread > 0 {
		more := ""
		if c.moreUnread {
			more = "more than "
		}
		fmt.Fprintf(&b, "- %s%s: call check_messages to read them.\n", more, plural(c.unread, "unread message"))
	}
	if len(c.held) > 0 {
		fmt.Fprintf(&b, "- You hold %s: %s. Release them with release_files when you are done.\n",
			plural(len(c.held), "file reservation"), listed(c.held, c.reservation))
	}
	if len(c.locks) > 0 {
		fmt.Fprintf(&b, "- You hold %s: %s.\n", plural(len(c.locks), "lock"), listed(c.locks, c.lock))
	}
	if len(c.others) > 0 {
		fmt.Fprintf(&b, "- Others' reservations in this repository: %s. Check list_reservations before you edit those paths: "+
			"reserve_files refuses an overlap.\n", listed(c.others, func(r messages.ReservationInfo) string {
			return holderName(r) + " holds " + c.reservation(r)
		}))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reservation is "pattern (exclusive, until T)", naming its repository
// when it is not this one.
func (c *startContext) reservation(r messages.ReservationInfo) string {
	kind := "shared"
	if r.Exclusive {
		kind = "exclusive"
	}
	where := ""
	if r.Repo != c.repo {
		where = " in " + r.Repo
	}
	return fmt.Sprintf("%s (%s, until %s)%s", r.Pattern, kind, r.ExpiresAt, where)
}

// lock is "key (until T)", saying where it applies when that is not this
// repository.
func (c *startContext) lock(l messages.LockInfo) string {
	switch {
	case l.Repo == "":
		return fmt.Sprintf("%s (mesh-wide, until %s)", l.Key, l.ExpiresAt)
	case l.Repo != c.repo:
		return fmt.Sprintf("%s (until %s) in %s", l.Key, l.ExpiresAt, l.Repo)
	}
	return fmt.Sprintf("%s (until %s)", l.Key, l.ExpiresAt)
}

func holderName(r messages.ReservationInfo) string {
	if r.HolderName != "" {
		return r.HolderName
	}
	return r.Holder[:min(len(r.Holder), 8)]
}

// listed writes at most maxListed items, then how many more there are.
func listed[T any](items []T, item func(T) string) string {
	parts := make([]string, 0, min(len(items), maxListed)+1)
	for i, it := range items {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(items)-maxListed))
			break
		}
		parts = append(parts, item(it))
	}
	return strings.Join(parts, "; ")
}

// plural is "1 lock", "2 locks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
