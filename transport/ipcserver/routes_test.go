package ipcserver

import (
	"slices"
	"strings"
	"testing"
)

func TestRoutesSorted(t *testing.T) {
	if !slices.IsSortedFunc(routes, func(a, b route) int {
		if a.path < b.path {
			return -1
		}
		if a.path > b.path {
			return 1
		}
		return 0
	}) {
		t.Error("routes are not sorted by path")
	}
}

// ownFeatures are the routes that are an ipc feature of their own under
// another family's path.
var ownFeatures = map[string]string{
	"/v1/inbox/*/ack":  "mail",
	"/v1/inbox/search": "inbox_search",
	"/v1/token/rotate": "token_rotate",
}

// TestRoutesAndFeatures: ipc_features (GET /v1/version) are exactly the
// route families of the table. A route's family is the first segment of
// its path after /v1/ (/v1/topics/join: topics), or, for the routes of
// ownFeatures, the feature named there. Every feature advertised has at
// least one route, every route's family is advertised, and none is
// advertised twice: a client that reads a feature finds its routes, and a
// family added to the table is not hidden from clients that ask first.
func TestRoutesAndFeatures(t *testing.T) {
	families := map[string][]string{}
	for _, rt := range routes {
		f, own := ownFeatures[rt.path]
		if !own {
			rest, _ := strings.CutPrefix(rt.path, "/v1/")
			f, _, _ = strings.Cut(rest, "/")
		}
		families[f] = append(families[f], rt.method+" "+rt.path)
	}
	for i, f := range ipcFeatures {
		if slices.Contains(ipcFeatures[:i], f) {
			t.Errorf("ipc feature %q is advertised twice", f)
		}
		if families[f] == nil {
			t.Errorf("ipc feature %q is advertised but no route serves it", f)
		}
	}
	for f, rts := range families {
		if !slices.Contains(ipcFeatures, f) {
			t.Errorf("routes %v are served but their feature %q is not advertised", rts, f)
		}
	}
}
