package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// route is one page or action; paths are under Prefix.
type route struct {
	method  string
	path    string
	handler func(*View, http.ResponseWriter, *http.Request, *session)
}

// routes is the whole view, sorted by path.
var routes = []route{
	{http.MethodGet, "/", (*View).meshPage},
	{http.MethodGet, "/compose", (*View).composePage},
	{http.MethodGet, "/events", (*View).events},
	{http.MethodGet, "/files", (*View).filesPage},
	{http.MethodGet, "/inbox", (*View).inboxPage},
	{http.MethodPost, "/inbox/seen", (*View).inboxSeen},
	{http.MethodPost, "/logout", (*View).logout},
	{http.MethodGet, "/outbox", (*View).outboxPage},
	{http.MethodGet, "/outbox/confirm", (*View).outboxConfirm},
	{http.MethodPost, "/outbox/drop", (*View).outboxDrop},
	{http.MethodPost, "/outbox/requeue", (*View).outboxRequeue},
	{http.MethodPost, "/send", (*View).send},
}

func findRoute(method, path string) (route, bool) {
	for _, rt := range routes {
		if rt.path == path && (rt.method == method || rt.method == http.MethodGet && method == http.MethodHead) {
			return rt, true
		}
	}
	return route{}, false
}

// pageTimeout bounds the API calls of one page.
const pageTimeout = 5 * time.Second

// Inbox page bounds: the newest InboxShown messages of the last InboxDays.
const (
	InboxShown = 200
	InboxDays  = 7
)

// OutboxShown is how many rows the outbox page lists.
const OutboxShown = 200

// meshData is the mesh page: the broker links, the peers, this machine's
// agent sessions and each mesh's nodes; a part that failed says why.
type meshData struct {
	Health    *messages.Health
	HealthErr string
	Peers     []ipc.MeshPeer
	PeersErr  string
	Sessions  []messages.SessionInfo
	SessErr   string
	Nodes     []meshNodes
}

type meshNodes struct {
	Mesh  string
	List  *messages.NodeList
	Error string
}

func (v *View) meshPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	var d meshData
	var err error
	if d.Health, err = v.api.Health(ctx); err != nil {
		d.HealthErr = errorDetail(err)
	}
	if d.Peers, err = v.api.Peers(ctx, ""); err != nil {
		d.PeersErr = errorDetail(err)
	}
	slices.SortFunc(d.Peers, func(a, b ipc.MeshPeer) int {
		return strings.Compare(a.Mesh+"\x00"+a.DisplayName, b.Mesh+"\x00"+b.DisplayName)
	})
	if d.Sessions, err = v.api.Sessions(ctx); err != nil {
		d.SessErr = errorDetail(err)
	}
	if d.Health != nil {
		for _, m := range d.Health.Meshes {
			n := meshNodes{Mesh: m.Mesh}
			if n.List, err = v.api.Nodes(ctx, m.Mesh); err != nil {
				n.Error = errorDetail(err)
			}
			d.Nodes = append(d.Nodes, n)
		}
	}
	v.render(w, r, s, "mesh", &d)
}

// inboxData is the inbox page: the newest messages, or a search's.
type inboxData struct {
	Items  []messages.InboxItem
	Unread int
	Query  string
	Error  string
}

func (v *View) inboxPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	d := inboxData{Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	q := url.Values{"limit": {"1000"}, "mark_seen": {"false"},
		"since": {v.opts.Now().AddDate(0, 0, -InboxDays).UTC().Format(time.RFC3339)}}
	for {
		page, err := v.api.Inbox(ctx, q)
		if err != nil {
			d.Error = errorDetail(err)
			break
		}
		d.Items = append(d.Items, page.Items...)
		if page.Next == "" {
			break
		}
		q.Set("after", page.Next)
	}
	if d.Query != "" {
		d.Items = slices.DeleteFunc(d.Items, func(it messages.InboxItem) bool { return !matches(it, d.Query) })
	}
	slices.Reverse(d.Items) // newest first
	if len(d.Items) > InboxShown {
		d.Items = d.Items[:InboxShown]
	}
	for _, it := range d.Items {
		if it.SeenAt == nil {
			d.Unread++
		}
	}
	v.render(w, r, s, "inbox", &d)
}

// matches is the inbox page's search: every word of q in the body or the
// sender's name, case folded.
func matches(it messages.InboxItem, q string) bool {
	text := strings.ToLower(it.SenderName + " " + it.Topic)
	if it.Body != nil {
		text += " " + strings.ToLower(*it.Body)
	}
	for _, word := range strings.Fields(strings.ToLower(q)) {
		if !strings.Contains(text, word) {
			return false
		}
	}
	return true
}

func (v *View) inboxSeen(w http.ResponseWriter, r *http.Request, s *session) {
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		v.back(w, r, "/inbox", "", "nothing was selected")
		return
	}
	n, err := v.api.MarkSeen(r.Context(), ids)
	if err != nil {
		v.back(w, r, "/inbox", "", errorDetail(err))
		return
	}
	v.back(w, r, "/inbox", plural(n, "message")+" marked seen", "")
}

// outboxData is the outbox page.
type outboxData struct {
	Status string
	Counts []statusCount
	Items  []messages.OutboxItem
	Error  string
}

type statusCount struct {
	Status string
	N      int
}

// outboxStatuses are the filters the page offers, "" for all.
var outboxStatuses = []string{"", messages.StatusPending, messages.StatusInflight, messages.StatusDone, messages.StatusDead,
	messages.StatusAborted}

func (v *View) outboxPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	d := outboxData{Status: r.URL.Query().Get("status")}
	if !slices.Contains(outboxStatuses, d.Status) {
		v.refuse(w, http.StatusBadRequest, "invalid_status", "no outbox status "+d.Status)
		return
	}
	if h, err := v.api.Health(ctx); err == nil {
		var pending, inflight, dead int
		for _, m := range h.Meshes {
			pending, inflight, dead = pending+m.QueueDepth, inflight+m.Inflight, dead+m.Dead
		}
		d.Counts = []statusCount{{messages.StatusPending, pending}, {messages.StatusInflight, inflight}, {messages.StatusDead, dead}}
	}
	page, err := v.api.ListOutbox(ctx, d.Status, OutboxShown, "")
	if err != nil {
		d.Error = errorDetail(err)
	} else {
		d.Items = page.Items
	}
	v.render(w, r, s, "outbox", &d)
}

// confirmData is the page that asks before an outbox action.
type confirmData struct {
	Action string // requeue | drop
	Row    *messages.OutboxItem
	Error  string
}

func (v *View) outboxConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := confirmData{Action: q.Get("action")}
	if d.Action != "requeue" && d.Action != "drop" {
		v.refuse(w, http.StatusBadRequest, "invalid_action", "the action is requeue or drop")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	page, err := v.api.ListOutbox(ctx, "", OutboxShown, "")
	if err != nil {
		d.Error = errorDetail(err)
	} else {
		for i := range page.Items {
			if page.Items[i].ID == q.Get("id") {
				d.Row = &page.Items[i]
			}
		}
		if d.Row == nil {
			d.Error = "no outbox row " + q.Get("id") + " among the newest " + plural(OutboxShown, "row")
		}
	}
	v.render(w, r, s, "confirm", &d)
}

func (v *View) outboxRequeue(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := v.api.Requeue(r.Context(), &messages.RequeueRequest{ID: r.PostForm.Get("id")})
	if err != nil {
		v.back(w, r, "/outbox", "", errorDetail(err))
		return
	}
	v.back(w, r, "/outbox", "requeued as "+res.NewClientMessageID, "")
}

func (v *View) outboxDrop(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := v.api.Drop(r.Context(), r.PostForm.Get("id"))
	if err != nil {
		v.back(w, r, "/outbox", "", errorDetail(err))
		return
	}
	v.back(w, r, "/outbox", "dropped "+res.ClientMessageID, "")
}

// filesData is the files and locks page: each mesh's reservations and
// locks; a part that failed (a broker without them) says why.
type filesData struct {
	Meshes []meshFiles
	Error  string
}

type meshFiles struct {
	Mesh         string
	Reservations []messages.ReservationInfo
	ResError     string
	Locks        []messages.LockInfo
	LockError    string
}

func (v *View) filesPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	var d filesData
	h, err := v.api.Health(ctx)
	if err != nil {
		d.Error = errorDetail(err)
	}
	for _, m := range meshesOf(h) {
		f := meshFiles{Mesh: m}
		if res, err := v.api.Reservations(ctx, m, ""); err != nil {
			f.ResError = errorDetail(err)
		} else {
			f.Reservations = res.Reservations
		}
		if list, err := v.api.Locks(ctx, m, ""); err != nil {
			f.LockError = errorDetail(err)
		} else {
			f.Locks = list.Locks
		}
		d.Meshes = append(d.Meshes, f)
	}
	v.render(w, r, s, "files", &d)
}

func meshesOf(h *messages.Health) []string {
	if h == nil {
		return nil
	}
	out := make([]string, 0, len(h.Meshes))
	for _, m := range h.Meshes {
		out = append(out, m.Mesh)
	}
	return out
}

// composeData is the compose page: where a message can go.
type composeData struct {
	Meshes []string
	Peers  []ipc.MeshPeer
	Error  string
}

func (v *View) composePage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	var d composeData
	h, err := v.api.Health(ctx)
	if err != nil {
		d.Error = errorDetail(err)
	}
	d.Meshes = meshesOf(h)
	if d.Peers, err = v.api.Peers(ctx, ""); err != nil && d.Error == "" {
		d.Error = errorDetail(err)
	}
	v.render(w, r, s, "compose", &d)
}

// send sends the compose form as the member (the person, not a session).
func (v *View) send(w http.ResponseWriter, r *http.Request, s *session) {
	f := r.PostForm
	to := strings.TrimSpace(f.Get("to"))
	if to == "" {
		to = f.Get("peer")
	}
	body := f.Get("message")
	req := &messages.SendRequest{To: to, Message: &body, Mesh: f.Get("mesh"), Priority: f.Get("priority"),
		ClientMessageID: "web-" + ulid.Make().String()}
	res, err := v.api.Send(r.Context(), req, "")
	if err != nil {
		v.back(w, r, "/compose", "", errorDetail(err))
		return
	}
	what := "queued"
	if res.Status == http.StatusOK {
		what = "already delivered"
	}
	v.back(w, r, "/outbox", req.ClientMessageID+" "+what+" for "+to, "")
}

func (v *View) logout(w http.ResponseWriter, r *http.Request, s *session) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix + "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
	v.refuse(w, http.StatusOK, "signed_out", "this browser is signed out; `claudemesh web` signs it in again")
}

// back redirects to page after an action (303: the reload of the result is
// a GET), saying what happened.
func (v *View) back(w http.ResponseWriter, r *http.Request, page, done, failed string) {
	q := url.Values{}
	if done != "" {
		q.Set("done", done)
	}
	if failed != "" {
		q.Set("failed", failed)
	}
	http.Redirect(w, r, Prefix+page+"?"+q.Encode(), http.StatusSeeOther)
}
