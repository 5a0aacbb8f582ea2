package broker

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Cross-replica reservation releases, as lock releases (lock_notify.go):
// the broker that commits a release tells its own connections of the mesh
// (their waiting requests try again; a holder whose reservations were
// forced released learns it); on PostgreSQL it also NOTIFYs, with the
// commit, and every other broker tells its connections.

// reservationChannel is the LISTEN/NOTIFY channel of reservation
// releases.
const reservationChannel = "claudemesh_reservation"

// ReservationsReleased is a release committed by the broker Origin:
// Holder's reservations of Patterns in Repo, forced released by ForcedBy
// when it is set.
type ReservationsReleased struct {
	MeshID   string   `json:"m"`
	Origin   string   `json:"o"`
	Repo     string   `json:"r"`
	Patterns []string `json:"p"`
	Holder   string   `json:"h,omitempty"`
	ForcedBy string   `json:"f,omitempty"`
}

func (s *Store) notifyReservationsReleased(ctx context.Context, tx *sqlx.Tx, r *ReservationsReleased) error {
	if s.d.name != postgresName {
		return nil
	}
	if len(r.Patterns) > 8 { // a notification carries at most 8000 bytes: the listeners only need to know
		r.Patterns = r.Patterns[:8]
	}
	return s.notifyJSON(ctx, tx, reservationChannel, "reservation release", r)
}

// ListenReservations calls fn with every reservation release a broker
// commits until ctx is done, and connected each time it starts listening.
// On SQLite it only waits for ctx.
func (s *Store) ListenReservations(ctx context.Context, connected func(), fn func(*ReservationsReleased)) error {
	return listenJSON(ctx, s, reservationChannel, "reservation", connected, fn)
}
