package integration

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestTCPPortInUseStatus: `daemon up` and `daemon status` say whether TCP
// is on and where. With the configured port taken (another daemon
// directory's daemon, say) the daemon takes a free loopback port, writes it
// to http.port and says so; a port demanded with --tcp that is taken fails
// the start with the cause alone, no actor noise.
func TestTCPPortInUseStatus(t *testing.T) {
	e := newEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	writeConfigTOML(t, e, fmt.Sprintf("[ipc]\ntcp_enabled = true\nhttp_port = %d\n", busy))

	up := runCLI(t, e, "daemon", "up")
	if up.code != 0 {
		t.Fatalf("daemon up with the configured port taken: exit %d\n%s%s", up.code, up.stdout, up.stderr)
	}
	pid, _ := strconv.Atoi(startedRe.FindStringSubmatch(up.stdout)[1])
	t.Cleanup(func() { runCLI(t, e, "daemon", "down") })
	port := readPort(t, e)
	if port == busy {
		t.Fatalf("http.port holds the taken port %d", busy)
	}
	if want := fmt.Sprintf("tcp: 127.0.0.1:%d (bearer token in %s); port %d was in use", port, e.file("local-token"), busy); !strings.Contains(up.stdout, want) {
		t.Errorf("daemon up printed:\n%s\nwant a line with %q", up.stdout, want)
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/version", port), nil)
	req.Header.Set("Authorization", "Bearer "+readTrimmed(t, e, "local-token"))
	resp, err := tcpClient().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/version on the port in http.port: %v %v", resp, err)
	}
	resp.Body.Close()
	if st := runCLI(t, e, "daemon", "status"); st.code != 0 || !strings.Contains(st.stdout, fmt.Sprintf("tcp: loopback port %d", port)) {
		t.Errorf("daemon status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	if down := runCLI(t, e, "daemon", "down"); down.code != 0 || !processGone(pid) {
		t.Fatalf("daemon down: exit %d\n%s%s", down.code, down.stdout, down.stderr)
	}

	demanded := runCLI(t, e, "daemon", "up", "--tcp", fmt.Sprintf("127.0.0.1:%d", busy))
	if demanded.code != 1 || !strings.Contains(demanded.stderr, "the port is in use") || strings.Count(strings.TrimSpace(demanded.stderr), "\n") != 0 {
		t.Errorf("daemon up --tcp on a taken port: exit %d, want 1 and one line naming the cause\nstdout:\n%s\nstderr:\n%s",
			demanded.code, demanded.stdout, demanded.stderr)
	}
	for _, f := range []string{"daemon.sock", "daemon.pid", "http.port"} {
		if e.exists(f) {
			t.Errorf("the failed start left %s", f)
		}
	}

	off := runCLI(t, e, "daemon", "up", "--no-tcp")
	if off.code != 0 || !strings.Contains(off.stdout, "tcp: off") {
		t.Errorf("daemon up --no-tcp: exit %d\n%s%s", off.code, off.stdout, off.stderr)
	}
	if st := runCLI(t, e, "daemon", "status"); st.code != 0 || !strings.Contains(st.stdout, "tcp: off") {
		t.Errorf("daemon status without TCP: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
}
