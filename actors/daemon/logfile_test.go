package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// rotatedName is what a rotated daemon.log is called.
var rotatedName = regexp.MustCompile(`^daemon\.log\.\d{8}T\d{6}\.\d{9}$`)

// record is one log record of exactly size bytes: "<tag> xxxx…\n".
func record(tag string, size int) []byte {
	b := bytes.Repeat([]byte("x"), size)
	copy(b, tag+" ")
	b[size-1] = '\n'
	return b
}

// writeRecord writes one record and requires the whole of it to be written.
func writeRecord(t *testing.T, l *LogFile, p []byte) {
	t.Helper()
	n, err := l.Write(p)
	if err != nil || n != len(p) {
		t.Fatalf("Write of %d bytes: n %d, err %v", len(p), n, err)
	}
}

// rotatedFiles lists the rotated logs in dir, oldest name first.
func rotatedFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "daemon.log.") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// tags are the first words of the records in a log file, in order; every
// record must be whole.
func tags(t *testing.T, path string, size int) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%size != 0 {
		t.Fatalf("%s holds %d bytes, not a whole number of %d-byte records", filepath.Base(path), len(b), size)
	}
	var out []string
	for len(b) > 0 {
		rec := b[:size]
		b = b[size:]
		if rec[size-1] != '\n' || bytes.IndexByte(rec[:size-1], '\n') >= 0 {
			t.Fatalf("%s: a record is split or merged: %q…", filepath.Base(path), rec[:min(40, len(rec))])
		}
		tag, _, _ := strings.Cut(string(rec), " ")
		out = append(out, tag)
	}
	return out
}

func openLog(t *testing.T, path string, maxSizeMB, maxAgeDays int) *LogFile {
	t.Helper()
	l, err := OpenLogFile(path, maxSizeMB, maxAgeDays)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ago sets the mtime of path to d before now.
func ago(t *testing.T, path string, d time.Duration) {
	t.Helper()
	when := time.Now().Add(-d)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

const day = 24 * time.Hour

// TestLogFileRotatesBySize: the write that would take daemon.log past the
// limit first moves it to exactly one daemon.log.<UTC time>; the new
// daemon.log holds only the later records, and no record is split.
func TestLogFileRotatesBySize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	l := openLog(t, path, 1, 14)
	const size = 100 << 10 // ten records fit in 1 MiB, the eleventh does not
	for i := 0; i < 10; i++ {
		writeRecord(t, l, record(fmt.Sprintf("r%02d", i), size))
	}
	if got := rotatedFiles(t, dir); len(got) != 0 {
		t.Fatalf("rotated before the limit: %v", got)
	}
	before := time.Now().UTC()
	writeRecord(t, l, record("r10", size))
	writeRecord(t, l, record("r11", size))
	rotated := rotatedFiles(t, dir)
	if len(rotated) != 1 || !rotatedName.MatchString(rotated[0]) {
		t.Fatalf("rotated files %v, want exactly one daemon.log.<stamp>", rotated)
	}
	stamp, err := time.Parse("20060102T150405.000000000", strings.TrimPrefix(rotated[0], "daemon.log."))
	if err != nil {
		t.Fatal(err)
	}
	if d := stamp.Sub(before); d < -time.Second || d > time.Minute {
		t.Errorf("stamp %s is not the UTC time of the rotation (%s)", stamp, before)
	}
	old := tags(t, filepath.Join(dir, rotated[0]), size)
	if want := []string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09"}; strings.Join(old, ",") != strings.Join(want, ",") {
		t.Errorf("rotated file holds %v, want %v", old, want)
	}
	if cur := tags(t, path, size); strings.Join(cur, ",") != "r10,r11" {
		t.Errorf("daemon.log holds %v, want [r10 r11]", cur)
	}
	fi, err := os.Stat(filepath.Join(dir, rotated[0]))
	if err != nil || fi.Size() > 1<<20 {
		t.Errorf("rotated file is %d bytes (%v), over the 1 MiB limit", fi.Size(), err)
	}
}

// TestLogFileNeverSplitsRecords: with records of an awkward size, every file
// holds whole records and together they hold every record once, in order.
func TestLogFileNeverSplitsRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	l := openLog(t, path, 1, 14)
	const size, n = 333_333, 7 // 3 records per file
	for i := 0; i < n; i++ {
		writeRecord(t, l, record(fmt.Sprintf("s%d", i), size))
	}
	rotated := rotatedFiles(t, dir)
	if len(rotated) != 2 {
		t.Fatalf("rotated files %v, want 2 after %d records of %d bytes", rotated, n, size)
	}
	var all []string
	for _, f := range rotated {
		got := tags(t, filepath.Join(dir, f), size)
		if len(got) != 3 {
			t.Errorf("%s holds %d records, want 3", f, len(got))
		}
		all = append(all, got...)
	}
	all = append(all, tags(t, path, size)...)
	if strings.Join(all, ",") != "s0,s1,s2,s3,s4,s5,s6" {
		t.Errorf("records across the files: %v", all)
	}
}

// TestLogFileBigRecordIntoEmptyFile: a record larger than the limit goes
// whole into an empty daemon.log rather than rotating an empty file.
func TestLogFileBigRecordIntoEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	l := openLog(t, path, 1, 14)
	big := record("big", 1<<20+1)
	writeRecord(t, l, big)
	if got := rotatedFiles(t, dir); len(got) != 0 {
		t.Errorf("rotated files %v after one record into an empty log", got)
	}
	writeRecord(t, l, record("next", 10))
	rotated := rotatedFiles(t, dir)
	if len(rotated) != 1 {
		t.Fatalf("rotated files %v, want 1", rotated)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, rotated[0])); !bytes.Equal(b, big) {
		t.Errorf("rotated file holds %d bytes, want the %d-byte record", len(b), len(big))
	}
	if b, _ := os.ReadFile(path); string(b) != "next xxxx\n" {
		t.Errorf("daemon.log holds %q", b)
	}
}

// TestLogFileAppendsAndCountsExistingSize: opening an existing daemon.log
// appends to it, and its size counts towards the limit.
func TestLogFileAppendsAndCountsExistingSize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	const size = 100 << 10
	var prior []byte
	for i := 0; i < 10; i++ {
		prior = append(prior, record(fmt.Sprintf("p%02d", i), size)...)
	}
	if err := os.WriteFile(path, prior, 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, path, 1, 14)
	writeRecord(t, l, record("n00", size))
	rotated := rotatedFiles(t, dir)
	if len(rotated) != 1 {
		t.Fatalf("rotated files %v: the existing 1000 KiB did not count", rotated)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, rotated[0])); !bytes.Equal(b, prior) {
		t.Error("the rotated file is not the earlier daemon.log")
	}
	if cur := tags(t, path, size); strings.Join(cur, ",") != "n00" {
		t.Errorf("daemon.log holds %v", cur)
	}
}

// TestLogFilePrunesOldRotatedFiles: rotated files older than the age limit
// are deleted at open and at the next rotation; younger ones, the current
// daemon.log and temp files stay.
func TestLogFilePrunesOldRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	oldA := filepath.Join(dir, "daemon.log.20200101T000000.000000000")
	young := filepath.Join(dir, "daemon.log.20200102T000000.000000000")
	tmp := filepath.Join(dir, "daemon.log.x.tmp")
	for _, f := range []string{oldA, young, tmp} {
		touch(t, f)
	}
	if err := os.WriteFile(path, []byte("current\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ago(t, oldA, 3*day)
	ago(t, young, day/2)
	ago(t, tmp, 30*day)
	ago(t, path, 30*day) // the live file is never pruned, however old

	l := openLog(t, path, 1, 2)
	for _, c := range []struct {
		path string
		want bool
	}{{oldA, false}, {young, true}, {tmp, true}, {path, true}} {
		if _, err := os.Stat(c.path); (err == nil) != c.want {
			t.Errorf("after open: %s exists %v, want %v", filepath.Base(c.path), err == nil, c.want)
		}
	}

	// A file that ages past the limit while the daemon runs goes at the next rotation.
	oldB := filepath.Join(dir, "daemon.log.20200103T000000.000000000")
	touch(t, oldB)
	ago(t, oldB, 3*day)
	writeRecord(t, l, record("a", 1<<20-100))
	if _, err := os.Stat(oldB); err != nil {
		t.Fatalf("%s was deleted before any rotation: %v", filepath.Base(oldB), err)
	}
	writeRecord(t, l, record("b", 200)) // rotates
	if _, err := os.Stat(oldB); !os.IsNotExist(err) {
		t.Errorf("%s older than max age survived the rotation (%v)", filepath.Base(oldB), err)
	}
	rotated := rotatedFiles(t, dir)
	var fresh int
	for _, f := range rotated {
		if f == filepath.Base(young) || f == filepath.Base(tmp) {
			continue
		}
		if !rotatedName.MatchString(f) {
			t.Errorf("unexpected file %s", f)
		}
		fresh++
	}
	if fresh != 1 {
		t.Errorf("rotated files %v, want the young one, the temp file and one new one", rotated)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young rotated file was deleted: %v", err)
	}
}

// TestLogFileSetLimitsAppliesToNextWrite: a lower size limit makes the very
// next write rotate, and a lower age limit prunes at that rotation.
func TestLogFileSetLimitsAppliesToNextWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	aging := filepath.Join(dir, "daemon.log.20200101T000000.000000000")
	touch(t, aging)
	ago(t, aging, 5*day)
	l := openLog(t, path, 2, 14)
	const size = 100 << 10
	for i := 0; i < 15; i++ { // 1.5 MiB: under 2 MiB, over 1 MiB
		writeRecord(t, l, record(fmt.Sprintf("a%02d", i), size))
	}
	if got := rotatedFiles(t, dir); len(got) != 1 {
		t.Fatalf("rotated under the 2 MiB limit: %v", got)
	}
	l.SetLimits(1, 1)
	writeRecord(t, l, record("b00", size))
	rotated := rotatedFiles(t, dir)
	if len(rotated) != 1 || rotated[0] == filepath.Base(aging) {
		t.Fatalf("after SetLimits(1, 1): rotated files %v, want one new file and the 5-day-old one pruned", rotated)
	}
	if got := tags(t, filepath.Join(dir, rotated[0]), size); len(got) != 15 {
		t.Errorf("rotated file holds %d records, want 15", len(got))
	}
	if cur := tags(t, path, size); strings.Join(cur, ",") != "b00" {
		t.Errorf("daemon.log holds %v, want [b00]", cur)
	}

	// Raising the limit again stops the rotation at the next write.
	l.SetLimits(3, 14)
	for i := 0; i < 20; i++ {
		writeRecord(t, l, record(fmt.Sprintf("c%02d", i), size))
	}
	if got := rotatedFiles(t, dir); len(got) != 1 {
		t.Errorf("rotated under the raised 3 MiB limit: %v", got)
	}
}
