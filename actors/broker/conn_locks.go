package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Fenced locks. A connection holds locks as the key it sends with (a
// session its session key) and the name it goes by; the store grants
// them (one conditional upsert, so two replicas on one PostgreSQL database
// never both grant). Locks outlive the connection: a holder that
// reconnects, here or to another replica, renews them under its token;
// one that does not loses them at their expiry. A release is pushed as
// lock_released to the mesh's other connections, on this broker and (by
// the store's notification) the other replicas, whose waiters retry at
// once.

// FeatureLocks is the lock frames' feature.
const FeatureLocks = "locks"

// lockFrames are the lock requests; a release tells the hub, which pushes
// lock_released.
var lockFrames = frames{
	answers((*conn).acquireLock),
	answers((*conn).renewLock),
	acts((*conn).releaseLock),
	answers((*conn).listLocks),
}

func (c *conn) holder() broker.LockHolder {
	return broker.LockHolder{Pubkey: c.sender, Name: c.displayName(), MemberID: c.member.ID}
}

func (c *conn) acquireLock(f *messages.LockAcquireFrame) {
	l, granted, err := c.store.AcquireLock(context.Background(), c.mesh.ID, f.Repo, f.Key, time.Duration(f.TTLMs)*time.Millisecond, c.holder())
	if err != nil {
		c.lockError(f.ReqID, err)
		return
	}
	out := &messages.LockResultFrame{Type: messages.TypeLockResult, Granted: granted, ReqID: f.ReqID}
	if l != nil {
		out.LockInfo = lockInfo(l)
	} else { // refused, and nobody holds it: taken and released between two reads
		out.LockInfo = messages.LockInfo{Key: f.Key, Repo: f.Repo}
	}
	c.sendFrame(out)
}

func (c *conn) renewLock(f *messages.LockRenewFrame) {
	l, err := c.store.RenewLock(context.Background(), c.mesh.ID, f.Repo, f.Key, f.FenceToken, time.Duration(f.TTLMs)*time.Millisecond,
		c.holder())
	if err != nil {
		c.lockError(f.ReqID, err)
		return
	}
	c.sendFrame(&messages.LockResultFrame{Type: messages.TypeLockResult, Granted: true, LockInfo: lockInfo(l), ReqID: f.ReqID})
}

func (c *conn) releaseLock(ctx actor.Context, f *messages.LockReleaseFrame) {
	fence, err := c.store.ReleaseLock(context.Background(), c.mesh.ID, c.replica, f.Repo, f.Key, f.FenceToken, c.holder())
	if err != nil {
		c.lockError(f.ReqID, err)
		return
	}
	if fence != 0 {
		ctx.Send(c.hub, &hubMeshPush{meshID: c.mesh.ID, except: c.id, frame: lockReleasedPush(f.Repo, f.Key)})
	}
	c.sendFrame(&messages.LockReleasedFrame{Type: messages.TypeLockReleased, Key: f.Key, Repo: f.Repo, Released: fence != 0, FenceToken: fence,
		ReqID: f.ReqID})
}

// lockReleasedPush is the lock_released frame told to the mesh's other
// connections.
func lockReleasedPush(repo, key string) []byte {
	push, _ := json.Marshal(&messages.LockReleasedFrame{Type: messages.TypeLockReleased, Key: key, Repo: repo, Released: true}) // always marshals
	return push
}

// listenLocks hands the other replicas' lock releases to the hub until ctx
// is done (PostgreSQL; on SQLite there are none).
func listenLocks(ctx context.Context, d *deps, root *actor.RootContext) {
	startListening(ctx, d, "locks", func(connected func()) {
		_ = d.store.ListenLocks(ctx, connected, func(r *broker.LockReleased) {
			if r.Origin != d.replica {
				root.Send(d.hub, &hubMeshPush{meshID: r.MeshID, frame: lockReleasedPush(r.Repo, r.Key)})
			}
		})
	})
}

func (c *conn) listLocks(f *messages.ListLocksFrame) {
	locks, err := c.store.Locks(context.Background(), c.mesh.ID, f.Repo, f.Repo == "")
	if err != nil {
		c.lockError(f.ReqID, err)
		return
	}
	out := &messages.LockListFrame{Type: messages.TypeLockList, Locks: make([]messages.LockInfo, len(locks)), ReqID: f.ReqID}
	for i := range locks {
		out.Locks[i] = lockInfo(&locks[i])
	}
	c.sendFrame(out)
}

// lockError answers a refused lock request with its code; a store failure
// is logged and internal.
func (c *conn) lockError(reqID string, err error) {
	c.sendFrame(c.refusal(reqID, err, "locks", errorCode{broker.ErrInvalidLockKey, messages.CodeInvalidLockKey},
		errorCode{broker.ErrInvalidLockRepo, messages.CodeInvalidLockRepo}, errorCode{broker.ErrInvalidLockTTL, messages.CodeInvalidLockTTL},
		errorCode{broker.ErrInvalidFence, messages.CodeInvalidFence}, errorCode{broker.ErrLockNotHeld, messages.CodeLockNotHeld}))
}

func lockInfo(l *broker.Lock) messages.LockInfo {
	return messages.LockInfo{Key: l.Key, Repo: l.Repo, FenceToken: l.Fence, Holder: l.Holder, HolderName: l.HolderName,
		AcquiredAt: isoTime(l.AcquiredAt), ExpiresAt: isoTime(l.ExpiresAt)}
}
