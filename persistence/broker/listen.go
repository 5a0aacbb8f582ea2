package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"
)

// The LISTEN connections. Each channel has a connection of its own, outside
// the pool. A connection can die without a word (a network partition, a
// proxy that drops it): nothing arrives, and a wait for a notification
// would never end. So a wait lasts at most the listen check; a quiet
// connection is then probed with a query that must answer within it too,
// and one that does not is dropped and replaced. A lost connection is
// replaced after listenRetry.

// DefaultListenCheck is how long a LISTEN connection may be quiet before it
// is probed, and how long the probe, and a connect, may take.
const DefaultListenCheck = 5 * time.Second

// listenRetry is the pause before re-establishing a lost LISTEN connection.
const listenRetry = time.Second

// DefaultListenName is the application_name of the LISTEN connections when
// the database URL sets none (else they are named after it, with
// "-listen"): how operators, and tests, find them in pg_stat_activity.
const DefaultListenName = "claudemesh-broker-listen"

// listenBound is how long a LISTEN connection that died without a word may
// go unnoticed, and unreplaced, when the listen check is check: a quiet
// wait, a probe, the retry pause and a connect.
func listenBound(check time.Duration) time.Duration { return 3*check + listenRetry }

// listenConfig parses the database URL for the LISTEN connections and names
// them.
func listenConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	name := DefaultListenName
	if u, err := url.Parse(databaseURL); err == nil && u.Query().Get("application_name") != "" {
		name = u.Query().Get("application_name") + "-listen"
	}
	cfg.RuntimeParams["application_name"] = name
	return cfg, nil
}

// notifyJSON NOTIFYs v as JSON on channel in tx: PostgreSQL sends it with
// the commit or not at all. On SQLite it does nothing. what names the
// notification in the error.
func (s *Store) notifyJSON(ctx context.Context, tx *sqlx.Tx, channel, what string, v any) error {
	if s.d.name != postgresName {
		return nil
	}
	payload, err := json.Marshal(v)
	if err == nil {
		_, err = s.txExec(ctx, tx, "SELECT pg_notify($1, $2)", channel, string(payload))
	}
	if err != nil {
		return fmt.Errorf("notify %s: %w", what, err)
	}
	return nil
}

// listenJSON is listen for notifications of JSON values: fn gets each
// decoded; one that does not decode is logged (<what>_notification_malformed)
// and passed over.
func listenJSON[T any](ctx context.Context, s *Store, channel, what string, connected func(), fn func(*T)) error {
	return s.listen(ctx, channel, connected, func(payload string) {
		var v T
		if err := json.Unmarshal([]byte(payload), &v); err != nil {
			s.log.Warn(what+"_notification_malformed", "err", err)
			return
		}
		fn(&v)
	})
}

// listen calls onPayload with every notification on channel until ctx is
// done, and connected after each (re)connection. A loss is logged once, at
// Warn, however many attempts its repair takes. On SQLite it only waits
// for ctx.
func (s *Store) listen(ctx context.Context, channel string, connected func(), onPayload func(string)) error {
	if s.d.name != postgresName {
		<-ctx.Done()
		return nil
	}
	var lostAt time.Time // zero while listening
	up := func() {
		if !lostAt.IsZero() {
			s.log.Info("listen_restored", "channel", channel, "down_for", time.Since(lostAt).Round(time.Millisecond))
			lostAt = time.Time{}
		}
		connected()
	}
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channel, up, onPayload)
		if ctx.Err() != nil {
			break
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
			s.log.Warn("listen_lost", "channel", channel, "err", err,
				"detail", "notifications are missed until it is back; the relay poll delivers meanwhile")
		} else {
			s.log.Debug("listen_retry_failed", "channel", channel, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
	return nil
}

// listenOnce connects, listens on channel and hands over notifications
// until the connection fails, a probe of it fails, or ctx is done.
func (s *Store) listenOnce(ctx context.Context, channel string, connected func(), onPayload func(string)) error {
	connectCtx, cancel := context.WithTimeout(ctx, s.listenCheck)
	conn, err := pgx.ConnectConfig(connectCtx, s.listenConfig)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), s.listenCheck)
		defer cancel()
		_ = conn.Close(closeCtx) // a dead connection has nothing to say
	}()
	if err := s.listenExec(ctx, conn, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	connected()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, s.listenCheck)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			onPayload(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for a listen check: the connection must prove alive.
			if err := s.listenExec(ctx, conn, "SELECT 1"); err != nil {
				return fmt.Errorf("probe a quiet connection: %w", err)
			}
		default:
			return err
		}
	}
}

// listenExec runs sql on a LISTEN connection within a listen check.
func (s *Store) listenExec(ctx context.Context, conn *pgx.Conn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, s.listenCheck)
	defer cancel()
	_, err := conn.Exec(ctx, sql)
	return err
}
