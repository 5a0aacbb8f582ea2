-- The reservation grants a session's broker connection renews
-- (actors/reservations.go): one row per route (the session's
-- "mesh/session"), repository id and fence token of the grant, with its
-- patterns (a JSON array, as granted) and the TTL each renewal asks for. A
-- daemon that restarts renews them when the route's connection is back; a
-- row is deleted when the grant is released, lost or abandoned (its
-- session ended while the broker was out of reach, or did not come back).
-- Every transition the daemon sees — these and a member's, which it does
-- not keep — is an audit entry of kind reservation.acquired,
-- reservation.released, reservation.lost or reservation.abandoned
-- (persistence.RecordReservation), its subject the repository id.
CREATE TABLE held_reservation (
  route       TEXT    NOT NULL,
  repo        TEXT    NOT NULL,
  fence       INTEGER NOT NULL,
  mesh        TEXT    NOT NULL,
  holder      TEXT    NOT NULL,   -- the key it is held as (pubkey)
  patterns    TEXT    NOT NULL,   -- JSON array
  ttl_ms      INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL,   -- Unix ms, the daemon's clock
  PRIMARY KEY (route, repo, fence)
) STRICT, WITHOUT ROWID;
