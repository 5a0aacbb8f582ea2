package messages

// Lock frames: fenced advisory locks held by the broker, per mesh and
// repository id. Upstream's broker has none; ours advertises the feature
// "locks". A connection holds a lock as the key it sends with (a session
// its session key). lock_acquire and lock_renew are answered lock_result,
// lock_release lock_released, list_locks lock_list; a refused request is
// an error frame (CodeInvalidLock*, CodeLockNotHeld, revoked). A release
// is also pushed, as lock_released without _reqId, to the mesh's other
// connections (on every broker replica), so that their waiters retry at
// once.

// Lock frame types.
const (
	TypeLockAcquire  = "lock_acquire"
	TypeLockRenew    = "lock_renew"
	TypeLockRelease  = "lock_release"
	TypeListLocks    = "list_locks"
	TypeLockResult   = "lock_result"
	TypeLockReleased = "lock_released"
	TypeLockList     = "lock_list"
)

// Lock error codes, of the error frame and of the IPC.
const (
	CodeInvalidLockKey  = "invalid_lock_key"
	CodeInvalidLockRepo = "invalid_lock_repo"
	CodeInvalidLockTTL  = "invalid_lock_ttl"
	CodeInvalidLockWait = "invalid_lock_wait"
	CodeInvalidFence    = "invalid_fence_token"
	CodeLockNotHeld     = "lock_not_held"
)

// LockAcquireFrame asks for a lock for TTLMs milliseconds; a holder that
// asks again extends it and keeps its fence token.
type LockAcquireFrame struct {
	Type  string `json:"type"`
	Key   string `json:"key"`
	Repo  string `json:"repo,omitempty"`
	TTLMs int64  `json:"ttl_ms"`
	ReqID string `json:"_reqId,omitempty"`
}

// LockRenewFrame extends a held lock by TTLMs from now; refused
// (lock_not_held) once the lock expired or went to another holder.
type LockRenewFrame struct {
	Type       string `json:"type"`
	Key        string `json:"key"`
	Repo       string `json:"repo,omitempty"`
	FenceToken int64  `json:"fence_token"`
	TTLMs      int64  `json:"ttl_ms"`
	ReqID      string `json:"_reqId,omitempty"`
}

// LockReleaseFrame frees a lock the connection holds (FenceToken 0: under
// whatever token). Releasing a lock not held is answered released false.
type LockReleaseFrame struct {
	Type       string `json:"type"`
	Key        string `json:"key"`
	Repo       string `json:"repo,omitempty"`
	FenceToken int64  `json:"fence_token,omitempty"`
	ReqID      string `json:"_reqId,omitempty"`
}

// ListLocksFrame asks for the mesh's held locks (of one repository when
// Repo is set).
type ListLocksFrame struct {
	Type  string `json:"type"`
	Repo  string `json:"repo,omitempty"`
	ReqID string `json:"_reqId,omitempty"`
}

// LockInfo is a lock as the broker reports it: its fence token (the
// holder's, or the last one granted when nobody holds it), the holder's
// key and name, and when (ISO 8601) it was taken and runs out.
type LockInfo struct {
	Key        string `json:"key"`
	Repo       string `json:"repo,omitempty"`
	FenceToken int64  `json:"fence_token"`
	Holder     string `json:"holder"`
	HolderName string `json:"holder_name"`
	AcquiredAt string `json:"acquired_at,omitempty"`
	ExpiresAt  string `json:"expires_at"`
}

// LockResultFrame answers lock_acquire and lock_renew: Granted with the
// caller's lock, or not granted with the lock as another holds it.
type LockResultFrame struct {
	Type    string `json:"type"`
	Granted bool   `json:"granted"`
	LockInfo
	ReqID string `json:"_reqId,omitempty"`
}

// LockReleasedFrame answers lock_release (Released: the caller held it),
// and is pushed without ReqID to the mesh's other connections.
type LockReleasedFrame struct {
	Type     string `json:"type"`
	Key      string `json:"key"`
	Repo     string `json:"repo,omitempty"`
	Released bool   `json:"released"`
	// FenceToken is, in the answer to a release that released, the fence
	// token the lock was held under (a release may name none).
	FenceToken int64  `json:"fence_token,omitempty"`
	ReqID      string `json:"_reqId,omitempty"`
}

// LockListFrame answers list_locks, by repository and key.
type LockListFrame struct {
	Type  string     `json:"type"`
	Locks []LockInfo `json:"locks"`
	ReqID string     `json:"_reqId,omitempty"`
}

func newLockClientFrame(typ string) any {
	switch typ {
	case TypeLockAcquire:
		return new(LockAcquireFrame)
	case TypeLockRenew:
		return new(LockRenewFrame)
	case TypeLockRelease:
		return new(LockReleaseFrame)
	case TypeListLocks:
		return new(ListLocksFrame)
	}
	return nil
}

// NewLockBrokerFrame is the decoder table, for a client, of the broker's
// lock frames: a pointer to the frame struct of typ, nil for another type.
func NewLockBrokerFrame(typ string) any {
	switch typ {
	case TypeLockResult:
		return new(LockResultFrame)
	case TypeLockReleased:
		return new(LockReleasedFrame)
	case TypeLockList:
		return new(LockListFrame)
	}
	return nil
}
