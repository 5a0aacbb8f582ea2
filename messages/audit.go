package messages

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// AuditGenesis is the prev_hash of the audit log's first entry (seq 1).
var AuditGenesis = strings.Repeat("0", 64)

// auditDomain opens every hashed entry, so that an audit hash is never the
// hash of anything else the project computes.
const auditDomain = "claudemesh-audit-v1\n"

// AuditHash is an audit entry's hash: hex SHA-256 over the domain tag,
// then prev_hash, kind, subject and detail each as an 8-byte big-endian
// length and its bytes, seq and at (Unix ms) as 8-byte big-endian
// integers. Every field has its length or a fixed width, so no two
// entries encode alike. outbox.db's triggers compute it through the SQL
// function audit_hash (persistence); a client recomputes it to verify.
func AuditHash(prevHash string, seq, at int64, kind, subject, detail string) string {
	h := sha256.New()
	h.Write([]byte(auditDomain))
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(prevHash)
	binary.BigEndian.PutUint64(n[:], uint64(seq))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(at))
	h.Write(n[:])
	field(kind)
	field(subject)
	field(detail)
	return hex.EncodeToString(h.Sum(nil))
}

// AuditTime renders an entry's at (Unix ms) as the IPC shows it: RFC 3339,
// UTC, milliseconds. ParseAuditTime reads it back.
func AuditTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ParseAuditTime is the Unix ms of an entry's at as AuditTime wrote it.
func ParseAuditTime(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("audit entry time %q: %w", s, err)
	}
	return t.UnixMilli(), nil
}

// ListAudit asks the store for the audit entries after seq After, oldest
// first, at most Limit of them. Sent by the IPC server (GET /v1/audit);
// the reply is *AuditPage.
type ListAudit struct {
	After int64
	Limit int
}

// AuditPage is the reply to *ListAudit and the body of GET /v1/audit.
// NextAfter is the After of the following page, 0 on the last one.
type AuditPage struct {
	Entries   []AuditEntry `json:"entries"`
	NextAfter int64        `json:"next_after,omitempty"`
	Err       error        `json:"-"`
}

// Failure returns the store's error, nil on success.
func (p *AuditPage) Failure() error { return p.Err }

// AuditEntry is one entry of the daemon's hash-chained audit log: a
// transition of an outbox row (kind "outbox.<status>", "outbox.accepted",
// "outbox.pruned", "outbox.deleted"), a retention pass over the log itself
// ("audit.pruned"), or of a lock ("lock.…"). Subject is what it happened
// to (an outbox row's client_message_id); Detail is a JSON object, given
// as the exact text that was hashed.
type AuditEntry struct {
	Seq      int64  `json:"seq"`
	At       string `json:"at"`
	Kind     string `json:"kind"`
	Subject  string `json:"subject"`
	Detail   string `json:"detail"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// Codes of GET /v1/audit's refusals.
const (
	CodeInvalidAuditAfter = "invalid_audit_after"
	CodeInvalidAuditLimit = "invalid_audit_limit"
)

// The checks an entry can fail (AuditBreak.Check).
const (
	AuditHashMismatch = "hash mismatch"
	AuditSeqGap       = "seq gap"
	AuditBadGenesis   = "prev_hash of seq 1 is not 64 zeros"
)

// AuditBreak is the first broken link of an audit chain: the entry at Seq
// failed Check.
type AuditBreak struct {
	Seq   int64
	Check string
}

func (b *AuditBreak) Error() string {
	return fmt.Sprintf("audit chain broken at seq %d: %s", b.Seq, b.Check)
}

// VerifyAudit checks one page of entries, in seq order, continuing from
// prev, the last entry of the page before (nil for the first page), and
// returns the page's last entry to pass with the next page. Each entry's
// hash must be that of its own fields, its seq must follow prev's by one,
// and its prev_hash must be prev's hash. The first entry read is trusted
// for its prev_hash unless it is seq 1 (whose prev_hash is AuditGenesis):
// retention prunes the oldest entries, and the chain is verified from the
// oldest one kept. The error, an *AuditBreak, names the first entry that
// fails.
func VerifyAudit(prev *AuditEntry, page []AuditEntry) (*AuditEntry, error) {
	for i := range page {
		e := &page[i]
		switch {
		case prev != nil && e.Seq != prev.Seq+1:
			return prev, &AuditBreak{Seq: e.Seq, Check: fmt.Sprintf("%s (it follows seq %d)", AuditSeqGap, prev.Seq)}
		case !e.hashes():
			return prev, &AuditBreak{Seq: e.Seq, Check: AuditHashMismatch}
		case prev != nil && e.PrevHash != prev.Hash:
			return prev, &AuditBreak{Seq: e.Seq, Check: fmt.Sprintf("prev_hash does not match entry %d", prev.Seq)}
		case prev == nil && e.Seq == 1 && e.PrevHash != AuditGenesis:
			return prev, &AuditBreak{Seq: e.Seq, Check: AuditBadGenesis}
		}
		prev = e
	}
	return prev, nil
}

// hashes reports whether e's hash is that of its fields.
func (e *AuditEntry) hashes() bool {
	at, err := ParseAuditTime(e.At)
	return err == nil && AuditHash(e.PrevHash, e.Seq, at, e.Kind, e.Subject, e.Detail) == e.Hash
}
