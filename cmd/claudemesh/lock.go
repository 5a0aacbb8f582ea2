package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// lockCmd is `claudemesh lock`: fenced advisory locks the mesh's broker
// holds, through the daemon. A lock taken inside an agent session is held
// while the session lives (the daemon renews it) and released when it
// ends; outside one it lasts its TTL unless renewed or taken again.
type lockCmd struct {
	Acquire lockAcquireCmd `cmd:"" help:"Take a lock (exit 3 when another holds it): prints its fence token, which grows with every new holder."`
	Renew   lockRenewCmd   `cmd:"" help:"Extend a lock you hold by its TTL (exit 3 when it is no longer yours)."`
	Release lockReleaseCmd `cmd:"" help:"Release a lock you hold (releasing one you do not hold changes nothing)."`
	List    lockListCmd    `cmd:"" help:"List the mesh's held locks with holder, fence token and expiry."`
}

// lockScope is the flags naming a lock's repository and mesh.
type lockScope struct {
	Repo string `placeholder:"ID" help:"The repository the key belongs to (locks of two repositories never collide); '.' for the git repository of the current directory. Default: none (mesh-wide)."`
	topicFlags
}

// repo resolves --repo ('.': the current directory's repository).
func (s *lockScope) repo() (string, error) {
	if s.Repo != "." {
		return s.Repo, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	id, err := gitrepo.ID(context.Background(), dir)
	if err != nil {
		return "", fmt.Errorf("%w: name the repository with --repo ID, or leave --repo out for a mesh-wide lock", err)
	}
	return id, nil
}

// errNotGranted exits 3: the lock is another's.
func errNotGranted(format string, args ...any) error {
	return &exitError{code: 3, err: fmt.Errorf(format, args...)}
}

type lockAcquireCmd struct {
	Key  string        `arg:"" help:"The lock's key, e.g. file:src/lib.rs (1-512 bytes of UTF-8)."`
	TTL  time.Duration `name:"ttl" default:"30s" help:"How long the lock is held without a renewal (1s to 1h)."`
	Wait time.Duration `name:"wait" default:"0s" help:"Wait up to this long for a lock another holds (at most 10m)."`
	lockScope
}

// checkTTL refuses a --ttl under a millisecond: the daemon reads a TTL of
// 0 ms as absent (its default), which such a --ttl would otherwise
// silently become. Any other is the daemon's to judge.
func checkTTL(d, lo time.Duration) error {
	if d < time.Millisecond {
		return usageErr("--ttl must be at least %s, not %s", messages.DurationWords(lo), d)
	}
	return nil
}

func (c *lockAcquireCmd) Run() error {
	if err := checkTTL(c.TTL, messages.MinLockTTL); err != nil {
		return err
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	req := &messages.LockAcquireRequest{Key: c.Key, Repo: repo, TTLMs: c.TTL.Milliseconds(), WaitMs: c.Wait.Milliseconds(), Mesh: c.Mesh}
	return lockRun(c.topicFlags, c.Wait, func(ctx context.Context, client *ipc.Client) (*messages.LockAcquired, error) {
		return client.AcquireLock(ctx, req)
	}, func(res *messages.LockAcquired) error {
		l := res.Lock
		if !res.Granted {
			how := "wait for it with --wait (up to 10m), or ask its holder"
			if c.Wait > 0 {
				how = "it was not released within --wait; ask its holder, or try again later"
			}
			return errNotGranted("%s is held by %s (fence token %d) until %s: %s", lockLabel(l.LockInfo), printable(l.HolderName),
				l.FenceToken, stamp(l.ExpiresAt), how)
		}
		fmt.Printf("granted %s: fence token %d, expires %s (mesh %s)\n", lockLabel(l.LockInfo), l.FenceToken, stamp(l.ExpiresAt), l.Mesh)
		if tok, _ := mcpserver.SessionToken(); tok == "" {
			fmt.Printf("not in an agent session: renew it before then (claudemesh lock renew %s --fence %d), or release it\n",
				printable(l.Key), l.FenceToken)
		}
		return nil
	})
}

type lockRenewCmd struct {
	Key   string        `arg:"" help:"The lock's key."`
	Fence int64         `name:"fence" required:"" placeholder:"N" help:"The fence token acquire printed."`
	TTL   time.Duration `name:"ttl" default:"30s" help:"The new TTL, from now (1s to 1h)."`
	lockScope
}

func (c *lockRenewCmd) Run() error {
	if err := checkTTL(c.TTL, messages.MinLockTTL); err != nil {
		return err
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	req := &messages.LockRenewRequest{Key: c.Key, Repo: repo, FenceToken: c.Fence, TTLMs: c.TTL.Milliseconds(), Mesh: c.Mesh}
	return lockRun(c.topicFlags, 0, func(ctx context.Context, client *ipc.Client) (*messages.LockAcquired, error) {
		res, err := client.RenewLock(ctx, req)
		var me *messages.Error
		if errors.As(err, &me) && me.Code == messages.CodeLockNotHeld {
			return nil, errNotGranted("%s", me.Detail)
		}
		return res, err
	}, func(res *messages.LockAcquired) error {
		fmt.Printf("renewed %s: fence token %d, expires %s\n", lockLabel(res.Lock.LockInfo), res.Lock.FenceToken, stamp(res.Lock.ExpiresAt))
		return nil
	})
}

type lockReleaseCmd struct {
	Key   string `arg:"" help:"The lock's key."`
	Fence int64  `name:"fence" placeholder:"N" help:"Release only under this fence token (default: whatever token you hold it under)."`
	lockScope
}

func (c *lockReleaseCmd) Run() error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	req := &messages.LockReleaseRequest{Key: c.Key, Repo: repo, FenceToken: c.Fence, Mesh: c.Mesh}
	return lockRun(c.topicFlags, 0, func(ctx context.Context, client *ipc.Client) (*messages.LockReleaseDone, error) {
		return client.ReleaseLock(ctx, req)
	}, func(res *messages.LockReleaseDone) error {
		label := lockLabel(messages.LockInfo{Key: res.Key, Repo: res.Repo})
		if !res.Released {
			fmt.Printf("%s was not held by you: nothing released\n", label)
			return nil
		}
		fmt.Printf("released %s\n", label)
		return nil
	})
}

type lockListCmd struct {
	Repo string `placeholder:"ID" help:"Only this repository's locks ('.': the current directory's git repository)."`
	topicFlags
}

func (c *lockListCmd) Run() error {
	scope := lockScope{Repo: c.Repo}
	repo, err := scope.repo()
	if err != nil {
		return err
	}
	return lockRun(c.topicFlags, 0, func(ctx context.Context, client *ipc.Client) (*messages.LockList, error) {
		return client.Locks(ctx, c.Mesh, repo)
	}, func(res *messages.LockList) error {
		return printList(res.Locks, false, "no locks held in mesh "+res.Mesh, "KEY\tREPO\tHOLDER\tFENCE\tEXPIRES",
			func(l messages.LockInfo) string {
				return row(l.Key, l.Repo, l.HolderName, fmt.Sprint(l.FenceToken), stamp(l.ExpiresAt))
			})
	})
}

// lockRun is topicRun with room for an acquire's wait.
func lockRun[T any](f topicFlags, wait time.Duration, call func(context.Context, *ipc.Client) (*T, error), text func(*T) error) error {
	return topicRunWithin(f, wait+20*time.Second, call, text)
}

func lockLabel(l messages.LockInfo) string {
	if l.Repo == "" {
		return printable(l.Key)
	}
	return printable(l.Key) + " (repo " + printable(l.Repo) + ")"
}
