package ipc

import (
	"context"
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// AcquireLock asks POST /v1/locks/acquire: granted with the fence token,
// or not granted with the lock as its holder has it. The request may wait
// req.WaitMs for the lock.
func (c *Client) AcquireLock(ctx context.Context, req *messages.LockAcquireRequest) (*messages.LockAcquired, error) {
	var res messages.LockAcquired
	wait := time.Duration(req.WaitMs) * time.Millisecond
	return &res, c.within(wait+c.timeout).do(ctx, http.MethodPost, "/v1/locks/acquire", req, &res)
}

// RenewLock asks POST /v1/locks/renew; a lock no longer held is a 409
// lock_not_held *messages.Error.
func (c *Client) RenewLock(ctx context.Context, req *messages.LockRenewRequest) (*messages.LockAcquired, error) {
	var res messages.LockAcquired
	return &res, c.do(ctx, http.MethodPost, "/v1/locks/renew", req, &res)
}

// ReleaseLock asks POST /v1/locks/release.
func (c *Client) ReleaseLock(ctx context.Context, req *messages.LockReleaseRequest) (*messages.LockReleaseDone, error) {
	var res messages.LockReleaseDone
	return &res, c.do(ctx, http.MethodPost, "/v1/locks/release", req, &res)
}

// Locks asks GET /v1/locks: mesh's held locks (of repo, when it is set).
func (c *Client) Locks(ctx context.Context, mesh, repo string) (*messages.LockList, error) {
	var res messages.LockList
	return &res, c.do(ctx, http.MethodGet, "/v1/locks"+query("mesh", mesh, "repo", repo), nil, &res)
}
