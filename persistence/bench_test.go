package persistence

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// BenchmarkDiskFsync measures the disk under the databases: one 4 KiB
// write and fdatasync per op, with the latency percentiles. files=3 has
// three files synced at once, each by its own loop, as the daemon's
// outbox.db, inbox.db and embedded broker WALs are: whether their syncs
// queue at the device.
//
//	go test -run='^$' -bench=BenchmarkDiskFsync -benchtime=2000x ./persistence/
func BenchmarkDiskFsync(b *testing.B) {
	for _, files := range []int{1, 3} {
		b.Run("files="+strconv.Itoa(files), func(b *testing.B) { benchFsync(b, files) })
	}
}

// benchFsync runs b.N write-and-fdatasync ops shared by files loops, each
// on a file of its own.
func benchFsync(b *testing.B, files int) {
	page := make([]byte, 4096)
	lat := make([][]time.Duration, files)
	fs := make([]*os.File, files)
	for k := range fs {
		f, err := os.Create(filepath.Join(b.TempDir(), "fsync"+strconv.Itoa(k)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fs[k] = f
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	for k, f := range fs {
		wg.Go(func() {
			for i := k; i < b.N; i += files {
				start := time.Now()
				if _, err := f.WriteAt(page, int64(i%256)*4096); err != nil {
					b.Error(err)
					return
				}
				if err := fdatasync(int(f.Fd())); err != nil { // as SyncWAL
					b.Error(err)
					return
				}
				lat[k] = append(lat[k], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "fsyncs/s")
	reportLatency(b, all)
}

// reportLatency reports the p50 and p99 of lat, which it sorts.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkDiskFsyncFrames is the disk's cost of a commit's size: frames
// WAL frames written as SQLite writes them (a 24-byte header, then a 4 KiB
// page, each its own pwrite), then one fdatasync, per op.
//
//	go test -run='^$' -bench=BenchmarkDiskFsyncFrames -benchtime=2000x ./persistence/
func BenchmarkDiskFsyncFrames(b *testing.B) {
	for _, frames := range []int{1, 8, 12, 16} {
		b.Run("frames="+strconv.Itoa(frames), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "wal"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const frame, logSize = 24 + 4096, 4 << 20
			page := make([]byte, 4096)
			if _, err := f.WriteAt(make([]byte, logSize), 0); err != nil { // a log already grown, as after its first checkpoint
				b.Fatal(err)
			}
			if err := fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			var off int64
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				for range frames {
					if off+frame > logSize {
						off = 0
					}
					if _, err := f.WriteAt(page[:24], off); err != nil {
						b.Fatal(err)
					}
					if _, err := f.WriteAt(page, off+24); err != nil {
						b.Fatal(err)
					}
					off += frame
				}
				if err := fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

// BenchmarkStoreAccept is the store's own ceiling: the §4.5 lookup and
// insert of one row with prepared statements, batch rows per transaction,
// each commit followed by the fsync of the WAL (as a strict accept's
// batch). batch=1 is one transaction per request.
//
//	go test -run='^$' -bench=BenchmarkStoreAccept -benchtime=20000x ./persistence/
func BenchmarkStoreAccept(b *testing.B) {
	payload := make([]byte, 400)
	for _, batch := range []int{1, 128} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			o, err := OpenOutbox(context.Background(), filepath.Join(b.TempDir(), "outbox.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				tx, err := o.Begin(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				for j := i; j < i+batch && j < b.N; j++ {
					id := "bench-" + strconv.Itoa(j)
					// One statement, no savepoint, as the store runs it.
					_, err := o.Accept(tx.Tx(), &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: id,
						Fingerprint: messages.Fingerprint{byte(j)}, Payload: payload, Now: int64(j)}, false)
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				if err := o.SyncWAL(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkStatusCheck is the cost of outbox.status's CHECK at an insert,
// written as an IN list (the schema before migration 0005) and as
// comparisons (after): SQLite builds an ephemeral table for an IN list of
// more than two constants each time it checks it. An in-memory table, one
// transaction: the CPU of the statement alone.
//
//	go test -run='^$' -bench=BenchmarkStatusCheck -count=3 ./persistence/
func BenchmarkStatusCheck(b *testing.B) {
	for _, c := range []struct{ name, check string }{
		{"in-list", `status IN ('pending','inflight','done','dead','aborted')`},
		{"comparisons", `status = 'pending' OR status = 'inflight' OR status = 'done' OR status = 'dead' OR status = 'aborted'`},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := sqlx.Open("sqlite", ":memory:")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT NOT NULL CHECK(` + c.check + `))`); err != nil {
				b.Fatal(err)
			}
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback()
			insert, err := tx.Prepare(`INSERT INTO t (status) VALUES ('pending')`)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := insert.Exec(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuditTrigger is the audit log's cost at an accept: the insert
// of one outbox row with its audit entry (the trigger of migration 0007,
// which reads the last entry, hashes in Go and inserts) and without it
// (the trigger dropped). 128 rows a transaction, no fsync: the
// statement's CPU alone.
//
//	go test -run='^$' -bench=BenchmarkAuditTrigger -count=3 ./persistence/
func BenchmarkAuditTrigger(b *testing.B) {
	payload := make([]byte, 400)
	for _, audited := range []bool{false, true} {
		b.Run(fmt.Sprintf("audited=%v", audited), func(b *testing.B) {
			o, err := OpenOutbox(context.Background(), filepath.Join(b.TempDir(), "outbox.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close()
			if !audited {
				o.db.MustExec(`DROP TRIGGER audit_outbox_insert`)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += 128 {
				tx, err := o.Begin(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				for j := i; j < i+128 && j < b.N; j++ {
					id := "bench-" + strconv.Itoa(j)
					if _, err := o.Accept(tx.Tx(), &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: id,
						Fingerprint: messages.Fingerprint{byte(j)}, Payload: payload, Now: int64(j)}, false); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOutboxWALPages counts the WAL pages a mail accept (subject,
// thread, acknowledgement asked: every partial index it can touch) and its
// later mark-done write, one transaction each: what an fsync of the outbox
// flushes per message. It also reports the accept's time alone, as one
// sender's pace has it: its BEGIN and statements (exec-µs/accept) and its
// commit (commit-µs/accept), no fsync.
//
//	go test -run='^$' -bench=BenchmarkOutboxWALPages -benchtime=2000x ./persistence/
func BenchmarkOutboxWALPages(b *testing.B) {
	ctx := context.Background()
	o, err := OpenOutbox(ctx, filepath.Join(b.TempDir(), "outbox.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	frames := func(mode string) int {
		var busy, log, done int
		if err := o.db.QueryRowxContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
			b.Fatal(err)
		}
		return log
	}
	// inTx runs fn in a transaction and returns the time of its BEGIN and
	// statements, and of its commit.
	inTx := func(fn func(tx *Tx) error) (exec, commit time.Duration) {
		start := time.Now()
		batch, err := o.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := fn(batch.Tx()); err != nil {
			b.Fatal(err)
		}
		executed := time.Now()
		if err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
		return executed.Sub(start), time.Since(executed)
	}
	const run = 50 // rows between checkpoints: the WAL's pages counted, then truncated
	payload := make([]byte, 700)
	accepted, done := 0, 0
	var acceptExec, acceptCommit time.Duration
	for i := 0; i < b.N; i += run {
		n := min(run, b.N-i)
		frames("TRUNCATE")
		for j := i; j < i+n; j++ {
			id := "mail-" + strconv.Itoa(j)
			exec, commit := inTx(func(tx *Tx) error {
				_, err := o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: id, Fingerprint: messages.Fingerprint{byte(j)},
					Payload: payload, Now: int64(j), Mail: &messages.Mail{Subject: "s", ThreadID: "t-1", AckRequired: true}}, true)
				return err
			})
			acceptExec, acceptCommit = acceptExec+exec, acceptCommit+commit
		}
		accepted += frames("PASSIVE")
		frames("TRUNCATE")
		for j := i; j < i+n; j++ {
			id := "mail-" + strconv.Itoa(j)
			inTx(func(tx *Tx) error { return o.MarkDone(tx, id, "b-"+id, "h-"+id, int64(j)) })
		}
		done += frames("PASSIVE")
	}
	b.ReportMetric(float64(accepted)/float64(b.N), "wal-pages/accept")
	b.ReportMetric(float64(done)/float64(b.N), "wal-pages/done")
	b.ReportMetric(float64(acceptExec.Microseconds())/float64(b.N), "exec-µs/accept")
	b.ReportMetric(float64(acceptCommit.Microseconds())/float64(b.N), "commit-µs/accept")
}
