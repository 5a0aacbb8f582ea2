package ipcserver

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Paging of GET /v1/audit.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// auditList answers GET /v1/audit?after=&limit=: the audit log's entries
// after seq after (0: from the oldest kept), oldest first, with
// next_after when more follow. The log covers every sender, so a session
// caller is refused.
func (s *Server) auditList(w http.ResponseWriter, r *http.Request) {
	if sess := sessionOf(r); sess != nil {
		writeError(w, &messages.Error{Status: http.StatusForbidden, Code: "session_scope",
			Detail: "the audit log covers every sender of the daemon; read it without a session token (claudemesh daemon audit list)"})
		return
	}
	q, err := parseAuditQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := ask[*messages.AuditPage](s, s.opts.Store, q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func parseAuditQuery(v url.Values) (*messages.ListAudit, error) {
	q := &messages.ListAudit{Limit: DefaultAuditLimit}
	if a := v.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidAuditAfter,
				Detail: "after must be a seq (an integer, 0 or more) from a previous page's next_after"}
		}
		q.After = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxAuditLimit {
			return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidAuditLimit,
				Detail: "limit must be an integer from 1 to " + strconv.Itoa(MaxAuditLimit)}
		}
		q.Limit = n
	}
	return q, nil
}
