package bench

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// cpuClock is how CPU time is read for a self-contained run: each process
// of the run from /proc (Linux; elsewhere the processes are not counted)
// and this one, the clients, from getrusage.
type cpuClock struct {
	pids map[string]int // role → pid
}

// cpuSample is the CPU time used so far by each role ("client" included).
type cpuSample map[string]time.Duration

func (c cpuClock) sample() cpuSample {
	s := cpuSample{}
	for role, pid := range c.pids {
		if d, ok := procCPU(pid); ok {
			s[role] = d
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s["client"] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

// perMessage is the CPU each role used between before and after, in
// milliseconds per delivered message, with their "total".
func perMessage(before, after cpuSample, delivered int) map[string]float64 {
	if delivered == 0 {
		return nil
	}
	out := map[string]float64{}
	var total time.Duration
	for role, a := range after {
		b, ok := before[role]
		if !ok {
			continue
		}
		out[role] = float64(a-b) / float64(time.Millisecond) / float64(delivered)
		total += a - b
	}
	out["total"] = float64(total) / float64(time.Millisecond) / float64(delivered)
	return out
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux the daemon supports).
const clockTick = 10 * time.Millisecond

// procCPU is the user and system CPU time pid has used, from
// /proc/<pid>/stat (utime and stime, the 14th and 15th fields).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	end := bytes.LastIndexByte(b, ')') // the command name may hold spaces and parentheses
	if end < 0 {
		return 0, false
	}
	f := bytes.Fields(b[end+1:]) // from the 3rd field, the state
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}
