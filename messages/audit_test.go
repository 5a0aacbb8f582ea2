package messages

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// auditVector is testdata/audit_chain.json: three entries of a row's
// life, their hashes computed apart from this package's code.
func auditVector(t testing.TB) []AuditEntry {
	t.Helper()
	b, err := os.ReadFile("testdata/audit_chain.json")
	if err != nil {
		t.Fatal(err)
	}
	var page AuditPage
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

// TestAuditChainVector: the vector verifies whole and a page of one entry
// at a time.
func TestAuditChainVector(t *testing.T) {
	entries := auditVector(t)
	if last, err := VerifyAudit(nil, entries); err != nil || last.Seq != 3 {
		t.Fatalf("whole: %v %v", last, err)
	}
	var prev *AuditEntry
	var err error
	for i := range entries {
		if prev, err = VerifyAudit(prev, entries[i:i+1]); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
	}
	if _, err := VerifyAudit(nil, nil); err != nil {
		t.Fatalf("an empty log: %v", err)
	}
}

// TestVerifyAuditBreaks: each kind of damage is named at the entry it
// breaks; a log pruned from the front verifies from its oldest entry.
func TestVerifyAuditBreaks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e []AuditEntry) []AuditEntry
		seq    int64 // 0: no break
		check  string
	}{
		{"detail", func(e []AuditEntry) []AuditEntry { e[1].Detail = `{}`; return e }, 2, AuditHashMismatch},
		{"hash", func(e []AuditEntry) []AuditEntry { e[0].Hash = e[1].Hash; return e }, 1, AuditHashMismatch},
		{"unreadable time", func(e []AuditEntry) []AuditEntry { e[2].At = "yesterday"; return e }, 3, AuditHashMismatch},
		{"the same time written otherwise", func(e []AuditEntry) []AuditEntry { e[0].At = "2025-11-25T18:41:51.123+01:00"; return e }, 0, ""},
		{"deleted entry", func(e []AuditEntry) []AuditEntry { return append(e[:1], e[2]) }, 3, AuditSeqGap + " (it follows seq 1)"},
		{"rehashed entry", func(e []AuditEntry) []AuditEntry {
			e[1].Detail = `{}`
			e[1].Hash = AuditHash(e[1].PrevHash, 2, 1764092511130, e[1].Kind, e[1].Subject, e[1].Detail)
			return e
		}, 3, "prev_hash does not match entry 2"},
		{"genesis", func(e []AuditEntry) []AuditEntry {
			e[0].PrevHash = e[2].Hash
			e[0].Hash = AuditHash(e[0].PrevHash, 1, 1764092511123, e[0].Kind, e[0].Subject, e[0].Detail)
			return e[:1]
		}, 1, AuditBadGenesis},
		{"pruned front", func(e []AuditEntry) []AuditEntry { return e[1:] }, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyAudit(nil, tc.change(auditVector(t)))
			var br *AuditBreak
			switch {
			case tc.seq == 0 && err != nil:
				t.Fatalf("want no break, got %v", err)
			case tc.seq != 0 && (!errors.As(err, &br) || br.Seq != tc.seq || br.Check != tc.check):
				t.Fatalf("got %v, want a break at seq %d: %s", err, tc.seq, tc.check)
			}
		})
	}
}

// TestAuditHashFields: a byte moved from one field to the next changes
// the hash (every field has its length).
func TestAuditHashFields(t *testing.T) {
	a := AuditHash(AuditGenesis, 1, 2, "outbox.ab", "c", "{}")
	b := AuditHash(AuditGenesis, 1, 2, "outbox.a", "bc", "{}")
	c := AuditHash(AuditGenesis, 2, 1, "outbox.ab", "c", "{}")
	if a == b || a == c || len(a) != 64 {
		t.Fatalf("%s %s %s", a, b, c)
	}
}

// FuzzVerifyAudit: any change to one field of one entry of a valid chain
// is a hash mismatch at exactly that entry; a change that leaves the
// entry's meaning (an equal time written otherwise) is none.
func FuzzVerifyAudit(f *testing.F) {
	f.Add(uint8(0), uint8(0), "2025-11-25T17:41:51.124Z")
	f.Add(uint8(1), uint8(3), `{"mesh":"local"}`)
	f.Add(uint8(2), uint8(5), "")
	f.Fuzz(func(t *testing.T, entry, field uint8, value string) {
		entries := auditVector(t)
		i := int(entry) % len(entries)
		e := &entries[i]
		before := *e
		switch field % 6 {
		case 0:
			e.At = value
		case 1:
			e.Kind = value
		case 2:
			e.Subject = value
		case 3:
			e.Detail = value
		case 4:
			e.PrevHash = value
		case 5:
			e.Hash = value
		}
		same := *e == before
		if field%6 == 0 {
			was, _ := ParseAuditTime(before.At)
			now, err := ParseAuditTime(value)
			same = err == nil && now == was
		}
		_, err := VerifyAudit(nil, entries)
		var br *AuditBreak
		switch {
		case same && err != nil:
			t.Fatalf("unchanged entry %d: %v", i+1, err)
		case !same && (!errors.As(err, &br) || br.Seq != e.Seq || br.Check != AuditHashMismatch):
			t.Fatalf("entry %d field %d = %q: %v, want a hash mismatch at seq %d", i+1, field%6, value, err, e.Seq)
		}
	})
}
