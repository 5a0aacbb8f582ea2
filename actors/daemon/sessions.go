package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// DefaultReapInterval is how often the reaper looks for sessions whose
// process is gone.
const DefaultReapInterval = 5 * time.Second

// sessions is the agent session registry: each registered session is a
// route of its own (ipcserver.RouteOf(mesh, id)), a mesh subtree whose
// connection opens with a session_hello under the session's key, served
// to requests that carry the session's token. sessions.json keeps the
// registry across restarts; keys live in their own files
// (config.Paths.SessionKey), so a session id speaks with one key while it
// comes back within config.SessionKeyRetention of its end (session_keys.go).
//
// Lookup reads an immutable map swapped under byMu, so that a request
// never waits for a registration: writers (register, deregister, the
// reaper) take mu, change the tree and the server, write sessions.json,
// then swap the map.
type sessions struct {
	d *Daemon

	mu      sync.Mutex                      // one writer at a time
	records map[string]config.SessionRecord // by token; under mu
	closed  bool                            // under mu: the daemon is stopping

	byMu    sync.RWMutex
	byToken map[string]*ipcserver.Session
	aliases map[string]string // hook session id → the session id it goes on as (config.SessionRecord.Aliases)
}

func newSessions(d *Daemon) *sessions {
	return &sessions{d: d, records: map[string]config.SessionRecord{}, byToken: map[string]*ipcserver.Session{}}
}

// Lookup implements ipcserver.Sessions.
func (s *sessions) Lookup(token string) *ipcserver.Session {
	s.byMu.RLock()
	defer s.byMu.RUnlock()
	return s.byToken[token]
}

// List implements ipcserver.Sessions: every session, oldest registration first.
func (s *sessions) List() []messages.SessionInfo {
	s.byMu.RLock()
	out := make([]messages.SessionInfo, 0, len(s.byToken))
	for _, sess := range s.byToken {
		out = append(out, sess.Info)
	}
	s.byMu.RUnlock()
	for i := range out {
		out[i].Live = s.d.hooks.liveState(out[i].SessionID) // hooks.go
	}
	slices.SortFunc(out, func(a, b messages.SessionInfo) int {
		return cmp.Or(cmp.Compare(a.RegisteredAt, b.RegisteredAt), cmp.Compare(a.SessionID, b.SessionID))
	})
	return out
}

// Register implements ipcserver.Sessions. The request is validated and names an
// attached membership.
func (s *sessions) Register(ctx context.Context, req *messages.RegisterSession) (*messages.SessionRegistered, error) {
	start, err := config.ProcessStartTime(req.PID)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: "invalid_session",
			Detail: fmt.Sprintf("pid %d is not a running process: register with the agent's own pid", req.PID)}
	}
	if err != nil {
		return nil, err
	}
	var given string
	if p := req.Presence; p != nil {
		id, err := meshcrypto.ParseIdentity(p.SessionSecretKey)
		if err != nil || id.PublicKeyHex() != p.SessionPubkey {
			return nil, &messages.Error{Status: http.StatusBadRequest, Code: "invalid_session",
				Detail: "presence.session_secret_key is not the secret key of presence.session_pubkey"}
		}
		given = p.SessionSecretKey
	}
	rec := config.SessionRecord{Token: req.Token, SessionID: req.SessionID, Mesh: req.Mesh, DisplayName: req.DisplayName,
		PID: req.PID, Cwd: req.Cwd, Role: req.Role, Groups: req.Groups, StartTime: start, RegisteredAt: time.Now().UnixMilli()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopping
	}
	if err := s.inUse(ctx, rec); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(s.d.opts.Paths.SessionKeyFile(req.Mesh, req.SessionID))
	secret, err := s.d.opts.Paths.SessionKey(req.Mesh, req.SessionID, given)
	if errors.Is(err, config.ErrSessionKeyMismatch) {
		return nil, &messages.Error{Status: http.StatusConflict, Code: "session_key_mismatch",
			Detail: "session " + req.SessionID + " already has another key on this machine: register without presence, or with a new session_id"}
	}
	if err != nil {
		return nil, err
	}
	sess, err := s.attach(rec, secret)
	if err != nil {
		return nil, err
	}
	if err := s.awaitHello(sess); err != nil {
		if errors.Is(statErr, os.ErrNotExist) { // minted for this registration, which stores nothing
			_ = os.Remove(s.d.opts.Paths.SessionKeyFile(req.Mesh, req.SessionID))
		}
		return nil, err
	}
	s.touchKey(req.Mesh, req.SessionID)
	return &messages.SessionRegistered{OK: true, RegisteredAt: rec.RegisteredAt, PresenceAccepted: given != "",
		SessionPubkey: sess.Info.Presence.SessionPubkey}, nil
}

// inUse refuses the registration of a session id a live session holds
// under another token: only its own token registers it again, its own
// process or one of that process's descendants (an agent's MCP server
// after its hook registered the session; the caller's pid as the socket's
// peer), or anyone once its process is gone. Under mu.
func (s *sessions) inUse(ctx context.Context, rec config.SessionRecord) error {
	route := ipcserver.RouteOf(rec.Mesh, rec.SessionID)
	for tok, old := range s.records {
		if tok != rec.Token && ipcserver.RouteOf(old.Mesh, old.SessionID) == route && alive(old) && !continues(ctx, rec, old) {
			return &messages.Error{Status: http.StatusConflict, Code: messages.CodeSessionInUse,
				Detail: fmt.Sprintf("session %s is registered and its process (pid %d) runs: register again with its own token, "+
					"or with a new session_id", rec.SessionID, old.PID)}
		}
	}
	return nil
}

// continues reports whether the caller registering rec is old's process
// or runs below it: its pid, as the socket's peer, is rec's and descends
// from old's. Where the system keeps no process tree to read (no /proc)
// it is taken to.
func continues(ctx context.Context, rec, old config.SessionRecord) bool {
	caller, ok := ipcserver.PeerPID(ctx)
	if !ok || caller != rec.PID {
		return false
	}
	for pid, depth := caller, 0; depth < 64; depth++ {
		if pid == old.PID {
			return true
		}
		parent, err := config.ParentPID(pid)
		if errors.Is(err, config.ErrNoProc) {
			return true
		}
		if err != nil || parent <= 1 {
			return false
		}
		pid = parent
	}
	return false
}

// helloWait bounds how long a registration waits for its session's first
// hello: a broker out of reach is not waited for longer (the session
// retries, and is served meanwhile).
const helloWait = 3 * time.Second

// awaitHello waits for the first hello of a new session's connection and
// undoes the registration when the broker refused it for good (its name
// is another member's). Under mu.
func (s *sessions) awaitHello(sess *ipcserver.Session) error {
	conn := s.d.tree.Conn(sess.Route)
	if conn == nil {
		return nil
	}
	res, err := s.d.tree.System.Root.RequestFuture(conn, &actors.AwaitLink{}, helloWait).Result()
	awaited, ok := res.(*actors.LinkAwaited)
	if err != nil || !ok || awaited.Err == nil {
		return nil
	}
	if _, err := s.drop(sess.Token, "refused"); err != nil {
		s.d.log.Warn("session_refused_cleanup", "err", err)
	}
	return awaited.Err
}

// attach records rec (replacing any session with its token or its route),
// saves sessions.json and serves the session's route, attaching its
// subtree unless one with the same hello is already there. Under mu.
func (s *sessions) attach(rec config.SessionRecord, secret string) (*ipcserver.Session, error) {
	id, err := meshcrypto.ParseIdentity(secret)
	if err != nil {
		return nil, fmt.Errorf("session key of %s: %w", rec.SessionID, err)
	}
	member, err := s.d.server.MeshBySlug(rec.Mesh)
	if err != nil {
		return nil, err
	}
	route := ipcserver.RouteOf(rec.Mesh, rec.SessionID)
	replaced := s.record(rec, route)
	if err := s.save(); err != nil {
		return nil, err
	}
	served := false
	if _, err := s.d.server.Served(route); err == nil {
		served = true
		if replaced == nil || !sameHello(*replaced, rec) {
			s.d.server.RemoveMesh(route)
			if err := s.d.tree.Detach(route); err != nil {
				return nil, err
			}
			served = false
		}
	}
	if !served {
		cfg, err := s.meshConfig(rec, id, member.Identity)
		if err != nil {
			return nil, err
		}
		pids, err := s.d.tree.Attach(cfg)
		if err != nil {
			delete(s.records, rec.Token)
			s.indexAliases()
			return nil, errors.Join(err, s.save())
		}
		s.d.server.AddMesh(ipcserver.Mesh{Identity: id, Parent: rec.Mesh, Name: rec.DisplayName, Info: messages.MeshInfo{Mesh: route,
			MeshID: member.Info.MeshID, MemberID: member.Info.MemberID, MemberPubkey: id.PublicKeyHex()}}, pids.Conn)
	}
	sess := &ipcserver.Session{Token: rec.Token, Mesh: rec.Mesh, Route: route, Info: infoOf(rec, id.PublicKeyHex(), member.Info.MemberPubkey)}
	s.swap(func(m map[string]*ipcserver.Session) {
		for tok, old := range m {
			if old.Route == route {
				delete(m, tok)
			}
		}
		m[rec.Token] = sess
	})
	s.d.log.Info("session_registered", "session", rec.SessionID, "mesh", rec.Mesh, "name", rec.DisplayName, "pid", rec.PID,
		"pubkey", id.PublicKeyHex()[:16])
	return sess, nil
}

// record puts rec in the records in place of any with its token or its
// route, and returns the one of its route it replaced (nil: none), whose
// aliases rec keeps: a session registered again (its MCP server after a
// restart) goes on under the ids it went on under. Under mu.
func (s *sessions) record(rec config.SessionRecord, route string) (replaced *config.SessionRecord) {
	for tok, old := range s.records {
		if tok == rec.Token || ipcserver.RouteOf(old.Mesh, old.SessionID) == route {
			if ipcserver.RouteOf(old.Mesh, old.SessionID) == route {
				replaced = &old
			}
			delete(s.records, tok)
		}
	}
	if replaced != nil && rec.Aliases == nil {
		rec.Aliases = replaced.Aliases
	}
	s.records[rec.Token] = rec
	s.indexAliases()
	return replaced
}

// sameHello reports whether a re-registration leaves the session's hello
// as it was, so that its connection can stay.
func sameHello(a, b config.SessionRecord) bool {
	return a.DisplayName == b.DisplayName && a.PID == b.PID && a.Cwd == b.Cwd && slices.Equal(a.Groups, b.Groups)
}

// meshConfig is the subtree of a session: its membership's broker, the
// session's key, a session_hello the member key vouches for.
func (s *sessions) meshConfig(rec config.SessionRecord, id, member *meshcrypto.Identity) (actors.MeshConfig, error) {
	members, err := s.d.opts.Paths.LoadMemberships()
	if err != nil {
		return actors.MeshConfig{}, err
	}
	for _, m := range members {
		if m.Slug != rec.Mesh {
			continue
		}
		cfg := s.d.meshConfig(m, id)
		cfg.Slug, cfg.Name = ipcserver.RouteOf(rec.Mesh, rec.SessionID), rec.DisplayName
		cfg.Session = &actors.SessionConfig{Parent: member, SessionID: rec.SessionID, PID: rec.PID, Cwd: rec.Cwd, Groups: rec.Groups}
		return cfg, nil
	}
	return actors.MeshConfig{}, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeMeshNotAttached,
		Detail: "config.json no longer records mesh " + rec.Mesh}
}

func infoOf(rec config.SessionRecord, sessionPubkey, memberPubkey string) messages.SessionInfo {
	return messages.SessionInfo{SessionID: rec.SessionID, Mesh: rec.Mesh, DisplayName: rec.DisplayName, PID: rec.PID,
		Cwd: rec.Cwd, Role: rec.Role, Groups: rec.Groups, StartTime: int64(rec.StartTime), RegisteredAt: rec.RegisteredAt,
		Presence: messages.SessionPresence{SessionPubkey: sessionPubkey, MemberPubkey: memberPubkey}, TokenPrefix: rec.Token[:8]}
}

// Deregister implements ipcserver.Sessions: the session's route stops being
// served and its subtree stops; its outbox rows wait for the session id to
// register again.
func (s *sessions) Deregister(token string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errStopping
	}
	return s.drop(token, "deregistered")
}

// errStopping answers a change of the registry once the daemon is stopping:
// sessions.json keeps what it had, and the sessions come back at the start.
var errStopping = &messages.Error{Status: http.StatusServiceUnavailable, Code: "daemon_stopping",
	Detail: "the daemon is stopping; register again once it is back"}

// close ends the registry's changes, waiting for one in progress (a
// registration, the reaper's pass): the daemon is stopping.
func (s *sessions) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// drop removes the session of token. Under mu.
func (s *sessions) drop(token, why string) (bool, error) {
	rec, ok := s.records[token]
	if !ok {
		return false, nil
	}
	delete(s.records, token)
	s.indexAliases()
	route := ipcserver.RouteOf(rec.Mesh, rec.SessionID)
	s.swap(func(m map[string]*ipcserver.Session) { delete(m, token) })
	err := s.save()
	s.d.server.RemoveMesh(route)
	if derr := s.d.tree.Detach(route); derr != nil {
		err = errors.Join(err, derr)
	}
	s.touchKey(rec.Mesh, rec.SessionID)
	s.d.log.Info("session_"+why, "session", rec.SessionID, "mesh", rec.Mesh, "pid", rec.PID)
	return true, err
}

// swap replaces the lookup map with a changed copy.
func (s *sessions) swap(change func(map[string]*ipcserver.Session)) {
	s.byMu.Lock()
	defer s.byMu.Unlock()
	next := make(map[string]*ipcserver.Session, len(s.byToken)+1)
	for k, v := range s.byToken {
		next[k] = v
	}
	change(next)
	s.byToken = next
}

// resolve is the session a hook's session id acts on: the id itself when
// a session has it, the session it goes on as when it is an alias, ""
// when neither.
func (s *sessions) resolve(id string) string {
	s.byMu.RLock()
	defer s.byMu.RUnlock()
	for _, sess := range s.byToken {
		if sess.Info.SessionID == id {
			return id
		}
	}
	return s.aliases[id]
}

// continueAs makes hook session id next an alias of the session agent
// process pid goes on as after a /clear (config.ContinuedSession), saved
// with that session's records and ended with them, and returns that
// session's id ("" when the process has none).
func (s *sessions) continueAs(next string, pid int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errStopping
	}
	prev, ok := config.ContinuedSession(slices.Collect(maps.Values(s.records)), pid)
	if !ok || prev.SessionID == next {
		return "", nil
	}
	for tok, rec := range s.records {
		if rec.SessionID == prev.SessionID && !slices.Contains(rec.Aliases, next) {
			rec.Aliases = append(slices.Clip(rec.Aliases), next)
			s.records[tok] = rec
		}
	}
	s.indexAliases()
	return prev.SessionID, s.save()
}

// indexAliases publishes the records' aliases to resolve. Under mu.
func (s *sessions) indexAliases() {
	m := map[string]string{}
	for _, rec := range s.records {
		for _, a := range rec.Aliases {
			m[a] = rec.SessionID
		}
	}
	s.byMu.Lock()
	s.aliases = m
	s.byMu.Unlock()
}

// save writes sessions.json. Under mu.
func (s *sessions) save() error {
	recs := make([]config.SessionRecord, 0, len(s.records))
	for _, r := range s.records {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b config.SessionRecord) int { return cmp.Compare(a.RegisteredAt, b.RegisteredAt) })
	if err := s.d.opts.Paths.SaveSessions(recs); err != nil {
		return fmt.Errorf("save sessions.json: %w", err)
	}
	return nil
}

// restore brings back the sessions of sessions.json whose process still
// runs (and is the same process), with the keys they had.
func (s *sessions) restore() error {
	recs, err := s.d.opts.Paths.LoadSessions()
	if err != nil {
		s.d.log.Warn("sessions_file_unreadable", "err", err)
	}
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		if !alive(rec) {
			s.d.log.Info("session_not_restored", "session", rec.SessionID, "mesh", rec.Mesh, "pid", rec.PID, "why", "process gone")
			s.abandonLocks(rec)
			s.touchKey(rec.Mesh, rec.SessionID)
			continue
		}
		secret, err := s.d.opts.Paths.SessionKey(rec.Mesh, rec.SessionID, "")
		if err == nil {
			_, err = s.attach(rec, secret)
		}
		if err != nil {
			s.d.log.Warn("session_not_restored", "session", rec.SessionID, "mesh", rec.Mesh, "err", err)
			s.abandonLocks(rec)
		}
	}
	return s.save()
}

// abandonLocks has the store forget the locks a session that does not come
// back kept (they run out at the broker).
func (s *sessions) abandonLocks(rec config.SessionRecord) {
	s.d.tree.System.Root.Send(s.d.tree.Store, &messages.AbandonHeldLocks{Route: ipcserver.RouteOf(rec.Mesh, rec.SessionID)})
}

// alive reports whether rec's process still runs: its pid exists and, where
// start times are known, started when it did at registration (a pid the
// kernel reused for another process is not the session's).
func alive(rec config.SessionRecord) bool {
	start, err := config.ProcessStartTime(rec.PID)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return start == 0 || rec.StartTime == 0 || start == rec.StartTime
}

// reap drops the sessions whose process is gone; the daemon calls it
// every ReapInterval. It reads /proc without holding any lock a request
// needs.
func (s *sessions) reap(time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var dead []string
	for tok, rec := range s.records {
		if !alive(rec) {
			dead = append(dead, tok)
		}
	}
	for _, tok := range dead {
		if _, err := s.drop(tok, "reaped"); err != nil {
			s.d.log.Warn("session_reap_failed", "err", err)
		}
	}
}

// every calls f with the time every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
