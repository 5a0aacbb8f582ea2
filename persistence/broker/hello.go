package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrHelloReplayed means the signature of a hello was already recorded: the
// same signed hello arrived before, on this broker or, on PostgreSQL, on
// another replica.
var ErrHelloReplayed = errors.New("this signed hello was already used")

// RecordHello records the signature of an accepted hello (or
// session_hello) signed by pubkey until expires, the moment its timestamp
// leaves the broker's clock-skew window (give some margin for the clocks
// of other replicas); a signature already recorded is ErrHelloReplayed.
// Ed25519 signatures are deterministic: a replayed hello carries the very
// same signature, and the hex is compared in lower case. Records past
// their expiry are deleted in the same transaction. On SQLite the commit
// skips its fsync: a power cut that loses the last records also restarts
// the broker, and a record lost so lets a hello of those few seconds be
// replayed once, within its window.
func (s *Store) RecordHello(ctx context.Context, pubkey, signature string, expires time.Time) error {
	tx, done, err := s.beginRelaxed(ctx)
	if err != nil {
		return fmt.Errorf("record hello: %w", err)
	}
	defer done()
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.d.rewrite("DELETE FROM hello_seen WHERE expires_at < ?"), s.d.time(s.clock())); err != nil {
		return fmt.Errorf("record hello: prune: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.d.rewrite(`INSERT INTO hello_seen (signature, pubkey, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (signature) DO NOTHING`), strings.ToLower(signature), strings.ToLower(pubkey), s.d.time(expires.Truncate(time.Millisecond)))
	if err != nil {
		return fmt.Errorf("record hello: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("record hello: %w", err)
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("record hello: %w", err)
	}
	if n == 0 {
		return ErrHelloReplayed
	}
	return nil
}

// Names of the settings a broker records.
const (
	// SettingPublicURL is the base URL joiners reach the broker's HTTP
	// listener at, recorded by `broker up` for `broker invite`.
	SettingPublicURL = "public_url"
)

// ErrSettingUnset means no broker recorded the setting.
var ErrSettingUnset = errors.New("setting not recorded")

// SetSetting records value under name, replacing what was there.
func (s *Store) SetSetting(ctx context.Context, name, value string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO broker_setting (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`),
		name, value, s.d.time(s.clock())); err != nil {
		return fmt.Errorf("record setting %s: %w", name, err)
	}
	return nil
}

// Setting returns the value recorded under name and when, or
// ErrSettingUnset.
func (s *Store) Setting(ctx context.Context, name string) (string, time.Time, error) {
	var value string
	var at time.Time
	err := s.rdb.QueryRowxContext(ctx, s.d.rewrite("SELECT value, updated_at FROM broker_setting WHERE name = ?"), name).
		Scan(&value, (*dbTime)(&at))
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, ErrSettingUnset
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read setting %s: %w", name, err)
	}
	return value, at, nil
}
