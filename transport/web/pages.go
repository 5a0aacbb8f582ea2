package web

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
	{http.MethodPost, "/inbox/ack", (*View).inboxAck},
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

// Inbox page bounds: InboxShown messages a page of the last InboxDays'
// (the newest, or those its Older and Newer links name).
const (
	InboxShown = 200
	InboxDays  = 7
)

// SearchShown is how many of a search's best matches the inbox page shows
// (the API's most).
const SearchShown = 100

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

// inboxData is the inbox page: a page of the messages by thread, or of
// one thread, or a search's matches in rank order. Total and Unread count
// every message the filter keeps, not the page's alone.
type inboxData struct {
	Threads []thread
	Found   []messages.InboxItem // a search's matches (Query set)
	Total   int
	Unread  int
	// First and Last are the page's messages as positions in Total,
	// newest first (1 is the newest); Newer and Older link the pages
	// beside it ("": none).
	First, Last  int
	Newer, Older string
	Filter       inboxFilter
	Error        string
}

// inboxFilter is what the page was asked for.
type inboxFilter struct {
	Query      string // search words
	Thread     string
	Importance string // high | urgent
	Unacked    bool   // acknowledgements this daemon owes
}

// thread is a conversation: its messages oldest first.
type thread struct {
	ID       string
	Subject  string
	Messages []messages.InboxItem
	Unread   int
	Owed     int // acknowledgements asked for and not given
	Latest   string
}

func (v *View) inboxPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	q := r.URL.Query()
	d := inboxData{Filter: inboxFilter{Query: strings.TrimSpace(q.Get("q")), Thread: q.Get("thread"),
		Importance: q.Get("importance"), Unacked: q.Get("unacked") == "true"}}
	if d.Filter.Query != "" {
		page, err := v.api.SearchInbox(ctx, d.Filter.Query, "", SearchShown)
		if err != nil {
			d.Error = errorDetail(err)
		} else {
			d.Found = page.Items
		}
		v.render(w, r, s, "inbox", &d)
		return
	}
	items, err := v.inboxItems(ctx, d.Filter)
	if err != nil {
		d.Error = errorDetail(err)
	}
	d.Total = len(items)
	for _, it := range items {
		if it.SeenAt == nil {
			d.Unread++
		}
	}
	from, to := inboxWindow(items, q.Get("before"), q.Get("after"))
	d.First, d.Last = len(items)-to+1, len(items)-from
	if to < len(items) {
		d.Newer = d.Filter.link("after", items[to-1].ID)
	}
	if from > 0 {
		d.Older = d.Filter.link("before", items[from].ID)
	}
	d.Threads = threadsOf(items[from:to])
	v.render(w, r, s, "inbox", &d)
}

// inboxWindow is the part of items (oldest first) a page shows: the
// InboxShown newest, or those just older than the row before or just
// newer than the row after. A page's links name rows rather than
// positions, so that a page keeps its messages while new ones arrive; a
// row no longer listed names the newest page.
func inboxWindow(items []messages.InboxItem, before, after string) (from, to int) {
	at := func(id string) int {
		return slices.IndexFunc(items, func(it messages.InboxItem) bool { return id != "" && it.ID == id })
	}
	to = len(items)
	if i := at(before); i >= 0 {
		to = min(max(i, InboxShown), len(items)) // a whole page, also at the oldest
	} else if i := at(after); i >= 0 {
		to = min(i+1+InboxShown, len(items))
	}
	return max(0, to-InboxShown), to
}

// values are the filter's query parameters, its search aside.
func (f inboxFilter) values() url.Values {
	q := url.Values{}
	if f.Thread != "" {
		q.Set("thread", f.Thread)
	}
	if f.Importance != "" {
		q.Set("importance", f.Importance)
	}
	if f.Unacked {
		q.Set("unacked", "true")
	}
	return q
}

// link is the inbox page of the filter with key=value, for a page's
// Newer and Older links.
func (f inboxFilter) link(key, value string) string {
	q := f.values()
	q.Set(key, value)
	return Prefix + "/inbox?" + q.Encode()
}

// inboxItems are the inbox rows of the last InboxDays the filter keeps,
// newest last.
func (v *View) inboxItems(ctx context.Context, f inboxFilter) ([]messages.InboxItem, error) {
	q := f.values()
	q.Set("limit", "1000")
	q.Set("mark_seen", "false")
	q.Set("since", v.opts.Now().AddDate(0, 0, -InboxDays).UTC().Format(time.RFC3339))
	var items []messages.InboxItem
	for {
		page, err := v.api.Inbox(ctx, q)
		if err != nil {
			return items, err
		}
		items = append(items, page.Items...)
		if page.Next == "" {
			break
		}
		q.Set("after", page.Next)
	}
	return items, nil
}

// threadsOf groups items (oldest first) by thread, the thread with the
// newest message first. A message with no thread is a thread of its own,
// named by its id (as a reply to it would be).
func threadsOf(items []messages.InboxItem) []thread {
	var out []thread
	at := map[string]int{}
	for _, it := range items {
		id := cmp.Or(it.ThreadID, it.ClientMessageID)
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, thread{ID: id})
		}
		t := &out[i]
		t.Messages = append(t.Messages, it)
		t.Latest = it.ReceivedAt
		if t.Subject == "" {
			t.Subject = it.Subject
		}
		if it.SeenAt == nil {
			t.Unread++
		}
		if it.AckRequired && it.AckedAt == nil {
			t.Owed++
		}
	}
	slices.SortStableFunc(out, func(a, b thread) int { return strings.Compare(b.Latest, a.Latest) })
	return out
}

func (v *View) inboxAck(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := v.api.AckMessage(r.Context(), r.PostForm.Get("ack"))
	if err != nil {
		v.back(w, r, "/inbox", "", errorDetail(err))
		return
	}
	v.back(w, r, "/inbox", "acknowledged "+res.ClientMessageID+" (receipt "+res.ReceiptStatus+")", "")
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
	Status      string
	AwaitingAck bool // the rows still waiting for an acknowledgement
	Counts      []statusCount
	Items       []messages.OutboxItem
	Error       string
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
	q := url.Values{"limit": {strconv.Itoa(OutboxShown)}}
	if d.Status != "" {
		q.Set("status", d.Status)
	}
	if d.AwaitingAck = r.URL.Query().Get("awaiting_ack") == "true"; d.AwaitingAck {
		q.Set("awaiting_ack", "true")
	}
	page, err := v.api.Outbox(ctx, q)
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
	row, err := v.api.OutboxRowByID(ctx, q.Get("id"))
	switch {
	case err != nil:
		d.Error = errorDetail(err)
	case row == nil:
		d.Error = "no outbox row " + q.Get("id")
	default:
		d.Row = row
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
		ClientMessageID: "web-" + ulid.Make().String(), Subject: strings.TrimSpace(f.Get("subject")),
		ThreadID: strings.TrimSpace(f.Get("thread")), ReplyToID: strings.TrimSpace(f.Get("reply_to")),
		Importance: f.Get("importance"), AckRequired: f.Get("ack") == "on"}
	if req.Importance == "normal" {
		req.Importance = ""
	}
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

// logout ends the browser's sign-in, in this browser and in every copy of
// its cookie.
func (v *View) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := v.in.remove(s.nonce, v.opts.Now()); err != nil {
		v.refuse(w, http.StatusInternalServerError, "internal", "the sign-out could not be recorded: "+err.Error())
		return
	}
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
