package ipc

import (
	"context"
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Reserve asks POST /v1/reservations: granted with the fence token, or
// refused with the conflicts. The request may wait req.WaitMs for them to
// go.
func (c *Client) Reserve(ctx context.Context, req *messages.ReserveRequest) (*messages.Reserved, error) {
	var res messages.Reserved
	wait := time.Duration(req.WaitMs) * time.Millisecond
	return &res, c.within(wait+c.timeout).do(ctx, http.MethodPost, "/v1/reservations", req, &res)
}

// ReleaseReservations asks POST /v1/reservations/release.
func (c *Client) ReleaseReservations(ctx context.Context, req *messages.ReleaseReservationsRequest) (*messages.ReservationsReleased, error) {
	var res messages.ReservationsReleased
	return &res, c.do(ctx, http.MethodPost, "/v1/reservations/release", req, &res)
}

// CheckPaths asks POST /v1/reservations/check: which of the paths another
// holder reserves exclusively.
func (c *Client) CheckPaths(ctx context.Context, req *messages.CheckPathsRequest) (*messages.PathCheck, error) {
	var res messages.PathCheck
	return &res, c.do(ctx, http.MethodPost, "/v1/reservations/check", req, &res)
}

// Reservations asks GET /v1/reservations: mesh's standing reservations
// (of repo, when it is set).
func (c *Client) Reservations(ctx context.Context, mesh, repo string) (*messages.ReservationList, error) {
	var res messages.ReservationList
	return &res, c.do(ctx, http.MethodGet, "/v1/reservations"+query("mesh", mesh, "repo", repo), nil, &res)
}
