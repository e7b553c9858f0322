// Package sandboxtest is the conformance suite every sandbox.Backend
// passes: isolation, networking, limits (a disk limit among them), layers
// and snapshots, disks (kept past their Sandbox too, and pruned), secrets, terminals and restart recovery, each a
// subtest that can fail. A backend that runs Sandboxes on a kernel of its own
// says so (Options.OwnKernel), and names the subtests it cannot pass, with
// why (Options.NotSupported). Only backends' tests import it.
package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// NewBackend returns a Backend keeping its state in stateDir, which may not
// exist yet. Called again with the same stateDir it must see the same
// Sandboxes, as a restarted Runner does.
type NewBackend func(t *testing.T, stateDir string) sandbox.Backend

// Options say how a backend differs from the host-kernel container the
// suite checks by default.
type Options struct {
	// OwnKernel says the Sandbox's processes run on a kernel of the
	// backend's own (gVisor's Sentry, a VM's), not as host processes: what
	// /proc shows inside (uid_map among it) is that kernel's view and says
	// nothing of the host, and no host process may hold a Sandbox process's
	// command line or environment at all.
	OwnKernel bool
	// NotSupported names the subtests, by their path under Run (such as
	// "KilledPastMemoryLimit/SandboxRunsOn"), that the backend cannot pass,
	// each with why, wrapping sandbox.ErrNotSupported. They are skipped,
	// saying so; the backend's docs name them.
	NotSupported map[string]error
}

// Run runs the suite. base is a read-only root filesystem layer with bash,
// coreutils and busybox (testkit.Rootfs).
func Run(t *testing.T, newBackend NewBackend, base string, opts Options) {
	for name, err := range opts.NotSupported {
		if !errors.Is(err, sandbox.ErrNotSupported) {
			t.Fatalf("NotSupported[%q] = %v: does not wrap sandbox.ErrNotSupported", name, err)
		}
	}
	s := &suite{newBackend: newBackend, base: base, opts: opts, root: t.Name()}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Lifecycle", s.testLifecycle},
		{"ExecEnvironmentDirUserAndExitCode", s.testExec},
		{"ReapsOrphans", s.testReaper},
		{"CannotSeeHostProcesses", s.testHostProcesses},
		{"CannotSeeAnotherSandboxFiles", s.testOtherSandboxFiles},
		{"CannotReachAnotherSandbox", s.testSandboxToSandbox},
		{"ReachesRelayByName", s.testRelay},
		{"CannotReachOtherHostPorts", s.testHostPorts},
		{"ReachesTheInternet", s.testEgress},
		{"RestrictedEgressGoesOnlyToTheRunnersProxyAndDNS", s.testRestrictedEgress},
		{"CannotReachBlockedNetworks", s.testBlockedNets},
		{"KilledPastMemoryLimit", s.testMemoryLimit},
		{"CapsResourcesWithNote", s.testCaps},
		{"WritesLeaveLowerLayersUnchanged", s.testLowerUnchanged},
		{"SnapshotBootsInAnotherSandbox", s.testSnapshot},
		{"StopStartKeepsDisksAndUpper", s.testStopStart},
		{"Binds", s.testBinds},
		{"DiskBindsInABindFollowSetDiskBinds", s.testDiskBinds},
		{"PruneDiskDeletesWhatKeepRefuses", s.testPruneDisk},
		{"WithDisksLendsAStoppedSandboxsDisks", s.testLendDisks},
		{"DiskLimitRefusesWritesPastIt", s.testDiskLimit},
		{"SecretInEnvNotOnDiskOrCommandLine", s.testSecret},
		{"TerminalAndResize", s.testPTY},
		{"WaitIsNotHeldByBackgroundChildren", s.testBackgroundChild},
		{"RootIsNotHostRoot", s.testRootNotHostRoot},
		{"RemoveLeavesNothing", s.testRemoveLeavesNothing},
		{"RemoveKeepingDisksHandsThemToTheNextSandbox", s.testKeepDisks},
		{"FailedStartLeavesNothingRunning", s.testFailedStart},
		{"RestartSeesRunningSandbox", s.testRestart},
		{"RejectsBadInput", s.testBadInput},
		{"ConcurrentSandboxes", s.testConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.skipUnsupported(t)
			tc.fn(t)
		})
	}
}

type suite struct {
	newBackend NewBackend
	base       string
	opts       Options
	root       string // the test Run was called in
}

// skipUnsupported skips t if the backend names it in NotSupported.
func (s *suite) skipUnsupported(t *testing.T) {
	t.Helper()
	if err, ok := s.opts.NotSupported[strings.TrimPrefix(t.Name(), s.root+"/")]; ok {
		t.Skipf("skipped: %v", err)
	}
}

// env is one subtest's backend and state directory.
type env struct {
	t        *testing.T
	b        sandbox.Backend
	stateDir string
	s        *suite
}

func (s *suite) env(t *testing.T) *env {
	dir := filepath.Join(t.TempDir(), "state")
	return &env{t: t, b: s.newBackend(t, dir), stateDir: dir, s: s}
}

var ctx = context.Background()

// sandbox creates and starts a Sandbox over the base, removed when the test
// ends, pass or fail.
func (e *env) sandbox(spec sandbox.Spec) string {
	e.t.Helper()
	if len(spec.Layers) == 0 {
		spec.Layers = []string{e.s.base}
	}
	if err := e.b.Create(ctx, spec); err != nil {
		e.t.Fatalf("create %s: %v", spec.ID, err)
	}
	b := e.b
	e.t.Cleanup(func() {
		if err := b.Remove(ctx, spec.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			e.t.Errorf("remove %s: %v", spec.ID, err)
		}
	})
	if err := e.b.Start(ctx, spec.ID); err != nil {
		e.t.Fatalf("start %s: %v", spec.ID, err)
	}
	return spec.ID
}

var stdEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}

// sh runs a shell script as root and returns its combined output and exit
// code.
func (e *env) sh(id, script string) (string, int) {
	e.t.Helper()
	return e.exec(id, sandbox.Cmd{Args: []string{"bash", "-c", script}, Env: stdEnv})
}

// must runs a script that must exit 0 and returns its trimmed output.
func (e *env) must(id, script string) string {
	e.t.Helper()
	out, code := e.sh(id, script)
	if code != 0 {
		e.t.Fatalf("in %s: %q exited %d: %s", id, script, code, out)
	}
	return strings.TrimSpace(out)
}

func (e *env) exec(id string, c sandbox.Cmd) (string, int) {
	e.t.Helper()
	var out testkit.Buffer
	c.Stdout, c.Stderr = &out, &out
	p, err := e.b.Exec(ctx, id, c)
	if err != nil {
		e.t.Fatalf("exec %v in %s: %v", c.Args, id, err)
	}
	code, err := wait(p, testenv.WaitMedium)
	if err != nil {
		e.t.Fatalf("exec %v in %s: %v", c.Args, id, err)
	}
	return out.String(), code
}

// wait waits for p, killing it past the deadline.
func wait(p sandbox.Process, within time.Duration) (int, error) {
	type result struct {
		code int
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		code, err := p.Wait()
		ch <- result{code, err}
	}()
	select {
	case r := <-ch:
		return r.code, r.err
	case <-time.After(within):
		p.Kill()
		<-ch
		return -1, fmt.Errorf("still running after %v", within)
	}
}

func random() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *suite) testLifecycle(t *testing.T) {
	e := s.env(t)
	if err := e.b.Create(ctx, sandbox.Spec{ID: "life", Layers: []string{s.base}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Remove(ctx, "life") })
	state := func(want sandbox.State) {
		t.Helper()
		st, err := e.b.Status(ctx, "life")
		if err != nil {
			t.Fatal(err)
		}
		if st.State != want {
			t.Fatalf("state: got %v, want %v", st.State, want)
		}
	}
	state(sandbox.StateCreated)
	if err := e.b.Create(ctx, sandbox.Spec{ID: "life", Layers: []string{s.base}}); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("second create: got %v, want ErrExists", err)
	}
	if _, err := e.b.Exec(ctx, "life", sandbox.Cmd{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("exec before start: got %v, want ErrNotRunning", err)
	}
	if err := e.b.Start(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	state(sandbox.StateRunning)
	if err := e.b.Start(ctx, "life"); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("second start: got %v, want ErrRunning", err)
	}
	if _, code := e.sh("life", "true"); code != 0 {
		t.Errorf("true: got exit %d, want 0", code)
	}
	list, err := e.b.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "life" || list[0].State != sandbox.StateRunning {
		t.Errorf("list: got %+v, %v, want life running", list, err)
	}
	if err := e.b.Stop(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	state(sandbox.StateStopped)
	if err := e.b.Stop(ctx, "life"); err != nil {
		t.Errorf("stopping a stopped sandbox: %v", err)
	}
	if _, err := e.b.Exec(ctx, "life", sandbox.Cmd{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("exec after stop: got %v, want ErrNotRunning", err)
	}
	if err := e.b.Remove(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Status(ctx, "life"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("status after remove: got %v, want ErrNotFound", err)
	}
	if err := e.b.Remove(ctx, "life"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second remove: got %v, want ErrNotFound", err)
	}
	for _, op := range []func() error{
		func() error { return e.b.Start(ctx, "nope") },
		func() error { return e.b.Stop(ctx, "nope") },
		func() error { _, err := e.b.Status(ctx, "nope"); return err },
		func() error { _, err := e.b.Exec(ctx, "nope", sandbox.Cmd{Args: []string{"true"}}); return err },
	} {
		if err := op(); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("unknown sandbox: got %v, want ErrNotFound", err)
		}
	}
}

func (s *suite) testExec(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "exec"})
	e.must(id, "mkdir -p /tmp/wd")
	tests := []struct {
		name     string
		cmd      sandbox.Cmd
		wantOut  string
		wantCode int
	}{
		{"whole environment", sandbox.Cmd{Args: []string{"/usr/bin/env"}, Env: []string{"A=1", "B=two words", "HOME=/nowhere"}}, "A=1\nB=two words\nHOME=/nowhere\n", 0},
		{"bare name without PATH", sandbox.Cmd{Args: []string{"printenv", "A"}, Env: []string{"A=x"}}, "x\n", 0},
		{"working directory", sandbox.Cmd{Args: []string{"pwd"}, Env: stdEnv, Dir: "/tmp/wd"}, "/tmp/wd\n", 0},
		{"default directory", sandbox.Cmd{Args: []string{"pwd"}, Env: stdEnv}, "/\n", 0},
		{"user by name", sandbox.Cmd{Args: []string{"id", "-u", "-n"}, Env: stdEnv, User: "nobody"}, "nobody\n", 0},
		{"user by uid:gid", sandbox.Cmd{Args: []string{"id", "-u"}, Env: stdEnv, User: "1234:1234"}, "1234\n", 0},
		{"root by default", sandbox.Cmd{Args: []string{"id", "-u"}, Env: stdEnv}, "0\n", 0},
		{"exit code", sandbox.Cmd{Args: []string{"sh", "-c", "exit 7"}, Env: stdEnv}, "", 7},
		{"stdin", sandbox.Cmd{Args: []string{"cat"}, Env: stdEnv, Stdin: strings.NewReader("piped\n")}, "piped\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := *e
			e.t = t
			out, code := e.exec(id, tc.cmd)
			if tc.name == "whole environment" {
				out = sortedLines(out) // the order of an environment is not kept everywhere
			}
			if out != tc.wantOut || code != tc.wantCode {
				t.Errorf("got %q exit %d, want %q exit %d", out, code, tc.wantOut, tc.wantCode)
			}
		})
	}
	if _, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"true"}, User: "no-such-user"}); err == nil {
		t.Error("exec as an unknown user: got no error")
	}
	if p, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"/no/such/program"}, Env: stdEnv}); err == nil {
		if code, err := wait(p, testenv.WaitShort); err == nil && code == 0 {
			t.Error("exec of a missing program: got exit 0")
		}
	}

	p, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"sleep", "600"}, Env: stdEnv})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := wait(p, testenv.WaitShort); err != nil || code != 128+int(syscall.SIGKILL) {
		t.Errorf("killed process: got exit %d, %v; want %d", code, err, 128+int(syscall.SIGKILL))
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func (s *suite) testReaper(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "reaper"})
	// Orphans: their parent shell exits at once, so they are re-parented
	// to PID 1, which must reap them when they exit.
	e.must(id, "for i in 1 2 3 4 5; do (sleep 0.1 &); done")
	testenv.Eventually(t, testenv.WaitShort, "no zombies in the sandbox", func() bool {
		out, _ := e.sh(id, "ps -eo stat=,comm= | awk '$1 ~ /^Z/'")
		return strings.TrimSpace(out) == ""
	})
}

func (s *suite) testHostProcesses(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "procs"})
	marker := "kndl-host-marker-" + random()
	host := exec.Command("sleep", "600", marker)
	host.Args[0] = marker
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	out := e.must(id, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls -d /proc/[0-9]* | wc -l")
	if strings.Contains(out, marker) {
		t.Errorf("a host process is visible in the sandbox: %s", out)
	}
	lines := strings.Split(out, "\n")
	n, _ := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	if n == 0 || n > 10 {
		t.Errorf("the sandbox sees %d processes, want a handful of its own", n)
	}
}

func (s *suite) testOtherSandboxFiles(t *testing.T) {
	e := s.env(t)
	a := e.sandbox(sandbox.Spec{ID: "files-a", Disks: []sandbox.Disk{{Name: "data", Target: "/data"}}})
	b := e.sandbox(sandbox.Spec{ID: "files-b", Disks: []sandbox.Disk{{Name: "data", Target: "/data"}}})
	secret := random()
	e.must(a, "echo "+secret+" > /root/only-a; echo "+secret+" > /data/only-a")
	out, code := e.sh(b, "cat /root/only-a /data/only-a 2>&1; grep -rl "+secret+" /root /data /tmp /var/tmp 2>/dev/null")
	if code == 0 || strings.Contains(out, secret) {
		t.Errorf("sandbox b sees a's files: exit %d: %s", code, out)
	}
}

// addrOf returns the Sandbox's own IPv4 address on its network.
func (e *env) addrOf(id string) string {
	e.t.Helper()
	out := e.must(id, "busybox ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1")
	if net.ParseIP(out) == nil {
		e.t.Fatalf("address of %s: got %q", id, out)
	}
	return out
}

// connects reports whether a TCP connection from the Sandbox to host:port
// succeeds within a few seconds.
func (e *env) connects(id, host string, port int) bool {
	e.t.Helper()
	_, code := e.sh(id, fmt.Sprintf("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d'", host, port))
	return code == 0
}

func (s *suite) testSandboxToSandbox(t *testing.T) {
	e := s.env(t)
	a := e.sandbox(sandbox.Spec{ID: "net-a"})
	b := e.sandbox(sandbox.Spec{ID: "net-b"})
	e.must(b, "mkdir -p /tmp/www && busybox httpd -p 8080 -h /tmp/www")
	bAddr := e.addrOf(b)
	testenv.Eventually(t, testenv.WaitShort, "b listens on its own address", func() bool {
		return e.connects(b, bAddr, 8080)
	})
	if e.connects(a, bAddr, 8080) {
		t.Errorf("sandbox a reached sandbox b at %s:8080", bAddr)
	}
	if out, code := e.sh(a, "timeout 3 ping -c1 -W1 "+bAddr+" 2>&1 || timeout 3 busybox ping -c1 -W1 "+bAddr+" 2>&1"); code == 0 {
		t.Errorf("sandbox a pinged sandbox b: %s", out)
	}
}

// listen listens on addr and greets every connection with greeting.
func listen(t *testing.T, addr, greeting string) net.Listener {
	t.Helper()
	return listenSaying(t, addr, func(net.Conn) string { return greeting })
}

// listenSaying is listen with a greeting made for each connection.
func listenSaying(t *testing.T, addr string, greeting func(net.Conn) string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, greeting(c)+"\n")
			c.Close()
		}
	}()
	return l
}

// testRelay: a Sandbox reaches the relay's address by RelayHost, from the
// address its Status reports, which the relay binds its Session token to,
// and the relay's port by gh's names for GitHub on port 80.
func (s *suite) testRelay(t *testing.T) {
	e := s.env(t)
	relay := e.b.Host().Relay
	_, port, err := net.SplitHostPort(relay)
	if err != nil {
		t.Fatalf("Host().Relay %q: %v", relay, err)
	}
	greeting := "relay-" + random()
	listenSaying(t, relay, func(c net.Conn) string {
		return greeting + " " + c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().String()
	})
	id := e.sandbox(sandbox.Spec{ID: "relay"})
	st, err := e.b.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out := e.must(id, fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && timeout 5 head -1 <&3", sandbox.RelayHost, port))
	got, peer, _ := strings.Cut(out, " ")
	if got != greeting {
		t.Errorf("relay greeting: got %q, want %q", out, greeting)
	}
	if st.Addr.IsValid() && peer != st.Addr.String() {
		t.Errorf("the relay saw the Sandbox come from %s, its Status says %s", peer, st.Addr)
	}
	// gh's names for GitHub, on port 80, reach the relay's port.
	for _, name := range sandbox.ForgeAPIHosts {
		out := e.must(id, fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && timeout 5 head -1 <&3", name, sandbox.ForgeAPIPort))
		if got, _, _ := strings.Cut(out, " "); got != greeting {
			t.Errorf("%s port %d: got %q, want the relay's greeting %q", name, sandbox.ForgeAPIPort, out, greeting)
		}
	}
}

func (s *suite) testHostPorts(t *testing.T) {
	e := s.env(t)
	l := listen(t, "0.0.0.0:0", "host")
	port := l.Addr().(*net.TCPAddr).Port
	id := e.sandbox(sandbox.Spec{ID: "hostports"})
	targets := []string{sandbox.RelayHost}
	if gw := e.must(id, "busybox ip route show default | awk '{print $3}'"); gw != "" {
		targets = append(targets, gw)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			targets = append(targets, ipn.IP.String())
		}
	}
	for _, target := range targets {
		if e.connects(id, target, port) {
			t.Errorf("the sandbox reached the host's port %d at %s", port, target)
		}
	}
	// The check can fail: the listener is there for the host itself.
	c, err := net.DialTimeout("tcp4", net.JoinHostPort(targets[len(targets)-1], strconv.Itoa(port)), time.Second)
	if err != nil {
		t.Fatalf("the host cannot reach its own listener: %v", err)
	}
	c.Close()
}

func (s *suite) testEgress(t *testing.T) {
	mirror := testkit.DebianMirror()
	host := strings.TrimPrefix(strings.TrimPrefix(mirror, "http://"), "https://")
	host, _, _ = strings.Cut(host, "/")
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, "80"), 5*time.Second)
	if err != nil {
		testenv.Lack(t, "a host that reaches "+host+":80")
	}
	c.Close()
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "egress"})
	if !e.connects(id, host, 80) {
		t.Errorf("the sandbox cannot reach %s:80, which the host reaches", host)
	}
}

// testRestrictedEgress: a restricted Sandbox's TCP connections, to any
// address and port, land at the egress proxy's address, which reads where
// each was going; its DNS queries, to any server, land at the egress DNS
// server's; the relay is reached as before, and resolv.conf names the
// relay's address. Opened again while stopped (SetEgress), its next boot
// goes around the proxy.
func (s *suite) testRestrictedEgress(t *testing.T) {
	e := s.env(t)
	h := e.b.Host()
	if h.EgressProxy == "" {
		t.Fatalf("Host() gives no egress proxy address: a backend must restrict a Sandbox's egress")
	}
	listenSaying(t, h.EgressProxy, func(c net.Conn) string {
		dst, err := egress.OriginalDst(c.(*net.TCPConn))
		if err != nil {
			return "proxy, no original destination: " + err.Error()
		}
		return "proxy " + dst.String()
	})
	greeting := "relay-" + random()
	listenSaying(t, h.Relay, func(net.Conn) string { return greeting })
	dns, err := net.ListenPacket("udp4", h.EgressDNS)
	if err != nil {
		t.Fatalf("listen on %s: %v", h.EgressDNS, err)
	}
	t.Cleanup(func() { dns.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := dns.ReadFrom(buf)
			if err != nil {
				return
			}
			dns.WriteTo([]byte("dns\n"), from)
		}
	}()
	_, relayPort, _ := net.SplitHostPort(h.Relay)
	relayIP, _, _ := net.SplitHostPort(h.EgressProxy)

	id := e.sandbox(sandbox.Spec{ID: "restricted", RestrictEgress: true})
	for _, dest := range []string{"192.0.2.1:443", "192.0.2.1:80", "198.51.100.7:22"} {
		host, port, _ := net.SplitHostPort(dest)
		if got := e.must(id, fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && timeout 5 head -1 <&3", host, port)); got != "proxy "+dest {
			t.Errorf("a connection to %s got %q, want it at the proxy, its destination kept", dest, got)
		}
	}
	if got := e.must(id, "exec 3<>/dev/udp/192.0.2.1/53 && echo query >&3 && timeout 5 head -1 <&3"); got != "dns" {
		t.Errorf("a DNS query to 192.0.2.1 got %q, want the egress DNS server's answer", got)
	}
	if got := e.must(id, fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && timeout 5 head -1 <&3", sandbox.RelayHost, relayPort)); got != greeting {
		t.Errorf("the relay: got %q, want %q", got, greeting)
	}
	if got := e.must(id, "cat /etc/resolv.conf"); got != "nameserver "+relayIP {
		t.Errorf("resolv.conf: %q, want the relay's address", got)
	}

	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.b.SetEgress(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	out, _ := e.sh(id, "exec 3<>/dev/tcp/192.0.2.1/443 && timeout 5 head -1 <&3")
	if strings.Contains(out, "proxy") {
		t.Errorf("opened again, a connection still reached the proxy: %q", out)
	}
}

// testBlockedNets gives the host a route to one address in each of
// outbound.RefusedV4, into a network namespace of the test's own that
// answers on a port there, as a cloud's metadata service or a private
// network would: the host reaches each, a Sandbox none. (Addresses a cloud
// host may need itself, such as 169.254.169.254 and 168.63.129.16, are not
// routed away; their ranges are.)
func (s *suite) testBlockedNets(t *testing.T) {
	testenv.RequireCommand(t, "ip")
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	tag := random()[:6]
	ns, hostEnd, nsEnd := "kndl-out-"+tag, "kbh"+tag, "kbn"+tag
	ip("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd)
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostEnd).Run() })
	ip("link", "set", nsEnd, "netns", ns)
	ip("addr", "add", "198.51.100.254/32", "dev", hostEnd)
	ip("link", "set", hostEnd, "up")
	ip("-n", ns, "link", "set", "lo", "up")
	ip("-n", ns, "link", "set", nsEnd, "up")
	ip("-n", ns, "route", "add", "198.51.100.254/32", "dev", nsEnd)
	// One address in each range no Sandbox may reach, none that a host's
	// gateway or metadata service uses: private, shared, link-local, IETF
	// protocol assignments, benchmarking.
	targets := []string{"10.255.255.10", "172.31.255.10", "192.168.255.10", "100.127.255.10", "169.254.255.10", "192.0.0.10", "198.19.255.10"}
	for _, target := range targets {
		ip("-n", ns, "addr", "add", target+"/32", "dev", "lo")
		ip("route", "add", target+"/32", "dev", hostEnd, "src", "198.51.100.254")
	}
	l := listenIn(t, ns)
	port := l.Addr().(*net.TCPAddr).Port
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "blocked"})
	for _, target := range targets {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(target, strconv.Itoa(port)), 3*time.Second)
		if err != nil {
			t.Fatalf("the host cannot reach the test's %s: %v", target, err)
		}
		c.Close()
		if e.connects(id, target, port) {
			t.Errorf("the sandbox reached %s:%d, in a blocked range", target, port)
		}
	}
}

// listenIn listens on a TCP port of every address of the network
// namespace ns, greeting each connection.
func listenIn(t *testing.T, ns string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	return listen(t, "0.0.0.0:0", "outside")
}

func (s *suite) testMemoryLimit(t *testing.T) {
	e := s.env(t)
	if !hasLimit(e.b.Host(), "memory") {
		testenv.Lack(t, "a host that enforces memory limits")
	}
	id := e.sandbox(sandbox.Spec{ID: "oom", Resources: sandbox.Resources{MemoryMiB: 64}})
	// 256 MiB through tail, which keeps its unterminated last line in
	// memory: past the limit, it is killed; without one, it exits 0.
	out, code := e.sh(id, "head -c 256m /dev/zero | tail -n 1 >/dev/null")
	if code == 0 {
		t.Errorf("allocating 256 MiB under a 64 MiB limit: got exit 0: %s", out)
	}
	t.Run("SandboxRunsOn", func(t *testing.T) {
		s.skipUnsupported(t)
		if _, code := e.sh(id, "true"); code != 0 {
			t.Errorf("the sandbox does not run after the OOM kill: exit %d", code)
		}
	})
}

func hasLimit(h sandbox.HostInfo, l string) bool {
	for _, x := range h.Limits {
		if x == l {
			return true
		}
	}
	return false
}

func (s *suite) testCaps(t *testing.T) {
	e := s.env(t)
	h := e.b.Host()
	spec := sandbox.Spec{ID: "caps", Layers: []string{s.base},
		Resources: sandbox.Resources{CPUs: h.MaxCPUs + 64, MemoryMiB: h.MaxMemoryMiB + 1024}}
	if err := e.b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Remove(ctx, "caps") })
	st, err := e.b.Status(ctx, "caps")
	if err != nil {
		t.Fatal(err)
	}
	if st.Resources.CPUs != h.MaxCPUs || st.Resources.MemoryMiB != h.MaxMemoryMiB {
		t.Errorf("resources: got %+v, want the caps %g CPUs, %d MiB", st.Resources, h.MaxCPUs, h.MaxMemoryMiB)
	}
	if len(st.Notes) < 2 {
		t.Errorf("notes: got %q, want one for CPUs and one for memory", st.Notes)
	}
	small := sandbox.Spec{ID: "small", Layers: []string{s.base}, Resources: sandbox.Resources{CPUs: 0.5, MemoryMiB: 128}}
	if err := e.b.Create(ctx, small); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Remove(ctx, "small") })
	st, _ = e.b.Status(ctx, "small")
	if st.Resources != small.Resources {
		t.Errorf("resources under the caps: got %+v, want %+v", st.Resources, small.Resources)
	}
}

// treeDigest describes every entry of a tree: path, type, mode, owner,
// size, mtime and a symlink's target.
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		fmt.Fprintf(&b, "%s %v %d:%d %d %d %s\n", p, info.Mode(), st.Uid, st.Gid, info.Size(), info.ModTime().UnixNano(), link)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func (s *suite) testLowerUnchanged(t *testing.T) {
	e := s.env(t)
	before := treeDigest(t, s.base)
	id := e.sandbox(sandbox.Spec{ID: "lower"})
	e.must(id, `echo changed >> /etc/os-release && rm /etc/issue && rm -r /usr/share/doc && \
		touch /new-file && chmod 4755 /usr/bin/env && chown nobody /etc/shells && \
		mkdir -p /opt/new/dir && mv /etc/motd /etc/motd.moved && ln -sf /nowhere /etc/debian_version`)
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if after := treeDigest(t, s.base); after != before {
		t.Error("the base layer changed under a sandbox's writes")
	}
}

func (s *suite) testSnapshot(t *testing.T) {
	e := s.env(t)
	a := e.sandbox(sandbox.Spec{ID: "snap-a"})
	e.must(a, `echo hello > /root/hello && ln /root/hello /root/hello.link && echo motd-a > /etc/motd && rm /etc/issue && \
		mkdir -p /opt/built/bin && printf '#!/bin/sh\necho built\n' > /opt/built/bin/tool && \
		chmod 755 /opt/built/bin/tool && useradd -m builder && su builder -c 'echo mine > ~/file' && \
		rm -r /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/only-new`)
	mapA := e.must(a, "cat /proc/self/uid_map")
	layer := filepath.Join(t.TempDir(), "layer")
	if err := e.b.Snapshot(ctx, a, layer); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("snapshot of a running sandbox: got %v, want ErrRunning", err)
	}
	if err := e.b.Stop(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Snapshot(ctx, a, layer); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Snapshot(ctx, a, layer); err == nil {
		t.Error("snapshot over an existing path: got no error")
	}
	b := e.sandbox(sandbox.Spec{ID: "snap-b", Layers: []string{layer, s.base}})
	// Under a kernel of the backend's own, uid_map is that kernel's; the
	// backend's own tests check the host's ranges differ.
	if mapB := e.must(b, "cat /proc/self/uid_map"); mapB == mapA && !s.opts.OwnKernel {
		t.Errorf("both sandboxes map root the same way: %s", mapB)
	}
	tests := []struct{ script, want string }{
		{"cat /root/hello", "hello"},
		{"cat /etc/motd", "motd-a"},
		{"test -e /etc/issue && echo present || echo gone", "gone"},
		{"/opt/built/bin/tool", "built"},
		{"stat -c %U:%G /root/hello /opt/built/bin/tool | sort -u", "root:root"},
		{"su builder -c 'cat ~/file; stat -c %U ~/file'", "mine\nbuilder"},
		{"ls /usr/share/doc", "only-new"},
		{"stat -c %h /root/hello", "2"},
		{"echo more >> /root/hello && cat /root/hello", "hello\nmore"},
	}
	for _, tc := range tests {
		if got := e.must(b, tc.script); got != tc.want {
			t.Errorf("in the snapshot's sandbox, %q: got %q, want %q", tc.script, got, tc.want)
		}
	}
}

func (s *suite) testStopStart(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "keep",
		Disks: []sandbox.Disk{{Name: "data", Target: "/var/lib/data"}},
		Tmpfs: []sandbox.Tmpfs{{Target: "/run/kndl", Mode: 0o700}}})
	e.must(id, "echo disk > /var/lib/data/f && echo upper > /root/f && echo mem > /run/kndl/f")
	if got := e.must(id, "stat -c %a:%U /run/kndl"); got != "700:root" {
		t.Errorf("tmpfs mode and owner: got %s, want 700:root", got)
	}
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.must(id, "cat /var/lib/data/f /root/f; test -e /run/kndl/f && echo tmpfs-kept || echo tmpfs-gone"); got != "disk\nupper\ntmpfs-gone" {
		t.Errorf("after stop and start: got %q, want disk, upper and tmpfs gone", got)
	}
}

func (s *suite) testBinds(t *testing.T) {
	e := s.env(t)
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "f"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.sandbox(sandbox.Spec{ID: "binds", Binds: []sandbox.Bind{
		{Source: rw, Target: "/workspace"},
		{Source: ro, Target: "/opt/kndl/bin", ReadOnly: true},
	}})
	if got := e.must(id, "cat /opt/kndl/bin/f; stat -c %U /opt/kndl/bin/f; (echo x > /opt/kndl/bin/f) 2>/dev/null && echo written || echo refused"); got != "host\nroot\nrefused" {
		t.Errorf("read-only bind: got %q, want its file, owned by root, and no write", got)
	}
	e.must(id, "echo mine > /workspace/new && mkdir /workspace/dir")
	for _, p := range []string{"new", "dir"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(rw, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s written through the bind: owned by %d:%d on the host, want 0:0", p, st.Uid, st.Gid)
		}
	}
}

// testDiskBinds: a Disk's subdirectory bound inside a Bind takes the
// writes there, not the Bind's host directory; SetDiskBinds is refused
// while running, and after a stop moves the bind for the next Start; a
// symlink the Sandbox left at a subdirectory's name is not followed.
func (s *suite) testDiskBinds(t *testing.T) {
	e := s.env(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "web", "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := e.sandbox(sandbox.Spec{ID: "diskbinds",
		Disks:     []sandbox.Disk{{Name: "deps", Target: "/var/lib/deps"}},
		Binds:     []sandbox.Bind{{Source: ws, Target: "/workspace"}},
		DiskBinds: []sandbox.DiskBind{{Disk: "deps", Sub: "web%2Fnode_modules", Target: "/workspace/web/node_modules"}},
	})
	e.must(id, "echo dep > /workspace/web/node_modules/x && ln -s /etc /var/lib/deps/evil")
	if got := e.must(id, "cat /var/lib/deps/web%2Fnode_modules/x"); got != "dep" {
		t.Errorf("the file through the disk: got %q, want dep", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "web", "node_modules", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file is in the Bind's host directory (%v), want it on the disk alone", err)
	}
	next := []sandbox.DiskBind{{Disk: "deps", Sub: "evil", Target: "/workspace/web/node_modules"}}
	if err := e.b.SetDiskBinds(ctx, id, next); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("SetDiskBinds while running: got %v, want ErrRunning", err)
	}
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.b.SetDiskBinds(ctx, id, []sandbox.DiskBind{{Disk: "nope", Sub: "a", Target: "/workspace/a"}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("SetDiskBinds to no disk: got %v, want ErrInvalid", err)
	}
	if err := e.b.SetDiskBinds(ctx, id, next); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.must(id, "ls -A /workspace/web/node_modules; test -L /var/lib/deps/evil && echo link; cat /var/lib/deps/web%2Fnode_modules/x"); got != "dep" {
		t.Errorf("after SetDiskBinds and a Start: got %q, want an empty fresh folder, no symlink followed, and the first one's file kept", got)
	}
}

// testPruneDisk: PruneDisk deletes a stopped Sandbox's Disk entries keep
// refuses, whole and without following a symlink, says how much each
// held, and keeps the rest; it is refused while the Sandbox runs.
func (s *suite) testPruneDisk(t *testing.T) {
	e := s.env(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "host"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.sandbox(sandbox.Spec{ID: "prune", Disks: []sandbox.Disk{{Name: "deps", Target: "/var/lib/deps"}},
		Binds: []sandbox.Bind{{Source: outside, Target: "/outside"}}})
	e.must(id, "mkdir -p /var/lib/deps/keep /var/lib/deps/old/a && head -c 1048576 /dev/zero > /var/lib/deps/old/a/f && "+
		"echo k > /var/lib/deps/keep/f && ln -s /outside /var/lib/deps/link")
	keep := func(name string) bool { return name == "keep" }
	if _, err := e.b.PruneDisk(ctx, id, "deps", keep); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("PruneDisk while running: got %v, want ErrRunning", err)
	}
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.PruneDisk(ctx, id, "nope", keep); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("PruneDisk of no such disk: got %v, want ErrNotFound", err)
	}
	pruned, err := e.b.PruneDisk(ctx, id, "deps", keep)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, p := range pruned {
		got[p.Name] = p.Bytes
	}
	if len(got) != 2 || got["old"] < 1<<20 {
		t.Errorf("pruned %+v, want old (at least 1 MiB) and link", pruned)
	}
	if _, ok := got["link"]; !ok {
		t.Errorf("pruned %+v, want the symlink too", pruned)
	}
	if _, err := os.Stat(filepath.Join(outside, "host")); err != nil {
		t.Errorf("the file the symlink pointed at: %v, want it left", err)
	}
	if err := e.b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.must(id, "ls -A /var/lib/deps; cat /var/lib/deps/keep/f"); got != "keep\nk" {
		t.Errorf("the disk after pruning: got %q, want keep alone, as it was", got)
	}
}

// testLendDisks: a backend that lends disks (sandbox.DiskLender, which
// a fork needs) refuses while the Sandbox runs, lends each Disk's
// directory with what the Sandbox wrote once it is stopped, and says
// ErrNotFound for an unknown id.
func (s *suite) testLendDisks(t *testing.T) {
	e := s.env(t)
	lender, ok := e.b.(sandbox.DiskLender)
	if !ok {
		t.Skip("the backend lends no disks")
	}
	id := e.sandbox(sandbox.Spec{ID: "lend", Disks: []sandbox.Disk{{Name: "claude", Target: "/var/lib/claude", Apart: true}, {Name: "deps", Target: "/var/lib/deps"}}})
	e.must(id, "echo c > /var/lib/claude/f && echo d > /var/lib/deps/f")
	read := func(disks map[string]string) error {
		for name, want := range map[string]string{"claude": "c\n", "deps": "d\n"} {
			if b, err := os.ReadFile(filepath.Join(disks[name], "f")); err != nil || string(b) != want {
				t.Errorf("disk %s lent: got %q (%v), want %q", name, b, err, want)
			}
		}
		return nil
	}
	if err := lender.WithDisks(ctx, id, read); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("WithDisks while running: got %v, want ErrRunning", err)
	}
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := lender.WithDisks(ctx, id, read); err != nil {
		t.Fatal(err)
	}
	if err := lender.WithDisks(ctx, "no-such-sandbox", read); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("WithDisks of an unknown id: got %v, want ErrNotFound", err)
	}
}

// testDiskLimit: a Sandbox with a disk limit gets ENOSPC past it, in its
// root filesystem and its Disks alike (they share it), while the host's
// filesystem has room and a Disk limited apart (Disk.Apart) is still
// written; Status says it is full, and freeing space makes writes work
// again. What it wrote survives a Stop, a stopped Sandbox holds
// no mount, a new backend (a restarted Runner) reattaches a running one;
// Snapshot and RemoveKeepingDisks read a stopped one's writes, a new
// Sandbox with a limit takes its Disks back, and Remove leaves nothing.
func (s *suite) testDiskLimit(t *testing.T) {
	e := s.env(t)
	if e.b.Host().DiskLimit == "" {
		testenv.Lack(t, "a host that can limit a Sandbox's disk ("+strings.Join(e.b.Host().Notes, " ")+")")
	}
	// Only what the state directory holds is compared: on a host shared
	// with other work, other Sandboxes come and go meanwhile.
	before := snapHost(t, e.stateDir, "full")
	left := func(when string, files bool) {
		t.Helper()
		after := snapHost(t, e.stateDir, "full")
		var mounts []string
		for _, m := range after.mounts {
			if strings.HasPrefix(m, e.stateDir+"/") {
				mounts = append(mounts, m)
			}
		}
		if len(mounts)+len(after.loops) > 0 {
			t.Errorf("%s: mounts %v and loop devices %v under the state directory, want none", when, mounts, after.loops)
		}
		if files && fmt.Sprint(before.files) != fmt.Sprint(after.files) {
			t.Errorf("files in the state directory %s:\ngot  %v\nwant %v", when, after.files, before.files)
		}
	}
	const mib = 64
	disks := []sandbox.Disk{{Name: "data", Target: "/var/lib/data"}, {Name: "state", Target: "/var/lib/state", Apart: true}}
	id := e.sandbox(sandbox.Spec{ID: "full", Resources: sandbox.Resources{DiskMiB: mib}, Disks: disks})
	if got := e.must(id, "ls -A /var/lib/data /var/lib/state"); got != "/var/lib/data:\n\n/var/lib/state:" {
		t.Errorf("new Disks: got %q, want both empty", got)
	}
	if st, err := e.b.Status(ctx, id); err != nil || st.Resources.DiskMiB != mib || st.DiskFull {
		t.Fatalf("status: got %+v, %v; want %d MiB of disk, not full", st, err, mib)
	}
	e.must(id, "echo kept > /root/kept")
	out, code := e.sh(id, "head -c 100M /dev/zero > /root/big")
	if code == 0 || !strings.Contains(out, "No space left on device") {
		t.Errorf("writing 100 MiB past a %d MiB limit: exit %d, %q; want ENOSPC", mib, code, out)
	}
	if out, code := e.sh(id, "head -c 1M /dev/zero > /var/lib/data/more"); code == 0 {
		t.Errorf("writing to a Disk with the limit reached: exit 0, %q; want ENOSPC", out)
	}
	e.must(id, "head -c 1M /dev/zero > /var/lib/state/apart")
	var host syscall.Statfs_t
	if err := syscall.Statfs(e.stateDir, &host); err != nil || host.Bavail*uint64(host.Bsize) < 100<<20 {
		t.Errorf("the host's filesystem: %v, %d bytes free; want it to have room", err, host.Bavail*uint64(host.Bsize))
	}
	st, err := e.b.Status(ctx, id)
	if err != nil || !st.DiskFull || st.DiskUsedMiB < mib/2 {
		t.Errorf("status with the limit reached: got %+v, %v; want full", st, err)
	}
	e.must(id, "rm /root/big && head -c 1M /dev/zero > /var/lib/data/more")
	if err := e.b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	left("with the Sandbox stopped", false)
	if err := e.b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	b2 := s.newBackend(t, e.stateDir)
	if got := e.must(id, "cat /root/kept; stat -c %s /var/lib/data/more /var/lib/state/apart"); got != "kept\n1048576\n1048576" {
		t.Errorf("after stop, start and a new backend: got %q, want the files kept", got)
	}
	if st, err := b2.Status(ctx, id); err != nil || st.State != sandbox.StateRunning || st.Resources.DiskMiB != mib {
		t.Errorf("status from a new backend: got %+v, %v; want running with %d MiB of disk", st, err, mib)
	}
	if err := b2.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	snap, kept := filepath.Join(t.TempDir(), "snap"), filepath.Join(t.TempDir(), "kept")
	if err := b2.Snapshot(ctx, id, snap); err != nil {
		t.Fatal(err)
	}
	if err := b2.RemoveKeepingDisks(ctx, id, kept); err != nil {
		t.Fatal(err)
	}
	left("after removing it, keeping its disks", true)
	for i := range disks {
		disks[i].From = filepath.Join(kept, disks[i].Name)
	}
	id = e.sandbox(sandbox.Spec{ID: "full", Layers: []string{snap, s.base}, Resources: sandbox.Resources{DiskMiB: mib}, Disks: disks})
	if got := e.must(id, "cat /root/kept; stat -c %s /var/lib/data/more /var/lib/state/apart"); got != "kept\n1048576\n1048576" {
		t.Errorf("a new Sandbox on its snapshot, with its disks: got %q, want the files", got)
	}
	if err := e.b.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	left("after remove", true)
}

func (s *suite) testSecret(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "secret"})
	value := "kndl-secret-" + random()
	var out testkit.Buffer
	p, err := e.b.Exec(ctx, id, sandbox.Cmd{
		Args:   []string{"bash", "-c", "echo ready; exec sleep 600"},
		Env:    append([]string{"SECRET=" + value}, stdEnv...),
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); wait(p, testenv.WaitShort) })
	testenv.Eventually(t, testenv.WaitMedium, "the process started", func() bool {
		return strings.Contains(out.String(), "ready")
	})
	if found := grepTree(t, e.stateDir, value); len(found) > 0 {
		t.Errorf("the secret is in files under the state directory: %v", found)
	}
	for _, dir := range []string{"/run/crun", "/run/runc", "/var/run/runsc"} {
		if found := grepTree(t, dir, value); len(found) > 0 {
			t.Errorf("the secret is in files under %s: %v", dir, found)
		}
	}
	// The scan goes again until the secret shows in an environment: just
	// after "ready" the shell may still be in its exec of sleep, when
	// /proc gives neither its environment nor its command line (seen under
	// load, with another process mounting Sandboxes beside this one).
	onCmdline := map[string]bool{}
	testenv.Eventually(t, testenv.WaitMedium, "a process holding the secret in its environment (else the checks above prove nothing)", func() bool {
		inEnv := false
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			if cmdline, err := os.ReadFile(filepath.Join(p, "cmdline")); err == nil && bytes.Contains(cmdline, []byte(value)) && !onCmdline[p] {
				onCmdline[p] = true
				t.Errorf("the secret is on the command line of %s: %q", p, cmdline)
			}
			if environ, err := os.ReadFile(filepath.Join(p, "environ")); err == nil && bytes.Contains(environ, []byte("SECRET="+value)) {
				inEnv = true
			}
		}
		if !s.opts.OwnKernel {
			return inEnv
		}
		// No host process holds it: it lives in the backend's kernel.
		if inEnv {
			t.Error("a host process holds the secret in its environment, under a kernel of the backend's own")
		}
		return e.inSandboxEnviron(id, "SECRET="+value)
	})
}

// inSandboxEnviron reports whether a process in the Sandbox has kv in its
// environment, as seen from inside; kv goes in on stdin, on no command line.
func (e *env) inSandboxEnviron(id, kv string) bool {
	e.t.Helper()
	out, _ := e.exec(id, sandbox.Cmd{Args: []string{"bash", "-c", "grep -lzxF -f - /proc/[0-9]*/environ 2>/dev/null | wc -l"},
		Env: stdEnv, Stdin: strings.NewReader(kv + "\n")})
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n > 0
}

// grepTree returns the regular files under root holding any of needles,
// without crossing into other filesystems (a mounted root filesystem is
// the base layer, read elsewhere).
func grepTree(t *testing.T, root, needle string) []string {
	t.Helper()
	var rootSt syscall.Stat_t
	if syscall.Lstat(root, &rootSt) != nil {
		return nil
	}
	var found []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		if st.Dev != rootSt.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if bytes.Contains(b, []byte(needle)) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

func (s *suite) testPTY(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "pty"})
	stdinR, stdinW := io.Pipe()
	var out testkit.Buffer
	p, err := e.b.Exec(ctx, id, sandbox.Cmd{
		Args:  []string{"bash", "-c", `tty; test -t 0 && echo is-a-terminal; stty size; read line; stty size; echo "got:$line"`},
		Env:   append([]string{"TERM=xterm"}, stdEnv...),
		TTY:   &sandbox.WinSize{Cols: 80, Rows: 24},
		Stdin: stdinR, Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitMedium, "the terminal reports 24 80", func() bool {
		return strings.Contains(out.String(), "24 80")
	})
	if err := p.Resize(sandbox.WinSize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdinW, "hello\n")
	code, err := wait(p, testenv.WaitMedium)
	stdinW.Close()
	if err != nil || code != 0 {
		t.Fatalf("wait: got %d, %v; output %q", code, err, out.String())
	}
	got := out.String()
	for _, want := range []string{"is-a-terminal", "24 80", "30 100", "got:hello"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output %q lacks %q", got, want)
		}
	}
	t.Run("NamedUnderDevPts", func(t *testing.T) {
		s.skipUnsupported(t)
		if !strings.Contains(got, "/dev/pts/") {
			t.Errorf("terminal output %q lacks the terminal's name, /dev/pts/N", got)
		}
	})
	plain, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"true"}, Env: stdEnv})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Resize(sandbox.WinSize{Cols: 1, Rows: 1}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("resize without a terminal: got %v, want ErrNotSupported", err)
	}
	wait(plain, testenv.WaitShort)
}

func (s *suite) testBackgroundChild(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "bg"})
	for _, tty := range []*sandbox.WinSize{nil, {Cols: 80, Rows: 24}} {
		var out testkit.Buffer
		// The child keeps the output (pipe or terminal) open for a minute.
		p, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"bash", "-c", "sleep 60 & echo started"},
			Env: stdEnv, TTY: tty, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, err := wait(p, 15*time.Second)
		if err != nil || code != 0 {
			t.Errorf("terminal %v: wait got %d, %v after %v", tty != nil, code, err, time.Since(start))
		}
		if !strings.Contains(out.String(), "started") {
			t.Errorf("terminal %v: output %q lacks the process's own", tty != nil, out.String())
		}
	}
}

func (s *suite) testRootNotHostRoot(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "uid"})
	if got := e.must(id, "id -u"); got != "0" {
		t.Fatalf("uid inside: got %s, want 0", got)
	}
	fields := strings.Fields(e.must(id, "head -1 /proc/self/uid_map"))
	if len(fields) == 3 && fields[0] == "0" && fields[1] == "0" && !s.opts.OwnKernel {
		t.Errorf("root inside is root on the host: uid_map %v", fields)
	}
	marker := "kndl-uid-marker-" + random()
	var out testkit.Buffer
	p, err := e.b.Exec(ctx, id, sandbox.Cmd{Args: []string{"bash", "-c", "exec -a " + marker + " sleep 600"}, Env: stdEnv, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); wait(p, testenv.WaitShort) })
	if s.opts.OwnKernel {
		// Its processes are the backend kernel's, none the host's: once
		// it runs inside, no host process carries the marker (the
		// backend's own tests check the host uids of what runs the kernel).
		testenv.Eventually(t, testenv.WaitMedium, "the marker process runs inside", func() bool {
			out, _ := e.sh(id, "pgrep -c -f '^"+marker+"'")
			return strings.TrimSpace(out) == "1"
		})
		if uids := hostProcessUIDs(marker); len(uids) > 0 {
			t.Errorf("a process of the sandbox is a host process (uids %v), under a kernel of the backend's own", uids)
		}
		return
	}
	var hostUIDs []int
	testenv.Eventually(t, testenv.WaitMedium, "the marker process runs", func() bool {
		hostUIDs = hostProcessUIDs(marker)
		return len(hostUIDs) > 0
	})
	for _, uid := range hostUIDs {
		if uid == 0 {
			t.Errorf("a process of the sandbox's root runs as the host's root")
		}
	}
}

// hostProcessUIDs returns the host uids of processes whose command line
// starts with marker.
func hostProcessUIDs(marker string) []int {
	var uids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.HasPrefix(cmdline, []byte(marker)) {
			continue
		}
		f, err := os.Open(filepath.Join(p, "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "Uid:" {
				uid, _ := strconv.Atoi(fields[1])
				uids = append(uids, uid)
			}
		}
		f.Close()
	}
	return uids
}

// hostState is what a Sandbox could leave on the host.
type hostState struct {
	netns, links, mounts, cgroups, files []string
	loops                                []string // loop devices over files in the state directory
	nft                                  string
}

// sameHost fails the test where the host differs from before; files says
// whether the state directory's files must match too.
func sameHost(t *testing.T, when string, before, after hostState, files bool) {
	t.Helper()
	checks := []struct {
		what          string
		before, after any
	}{
		{"network namespaces", before.netns, after.netns},
		{"network interfaces", before.links, after.links},
		{"mounts", before.mounts, after.mounts},
		{"loop devices", before.loops, after.loops},
		{"cgroups", before.cgroups, after.cgroups},
		{"nftables ruleset", before.nft, after.nft},
	}
	if files {
		checks = append(checks, struct {
			what          string
			before, after any
		}{"files in the state directory", before.files, after.files})
	}
	for _, c := range checks {
		if fmt.Sprint(c.before) != fmt.Sprint(c.after) {
			t.Errorf("%s %s:\ngot  %v\nwant %v", c.what, when, c.after, c.before)
		}
	}
}

func snapHost(t *testing.T, stateDir, id string) hostState {
	t.Helper()
	var h hostState
	if ns, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ns {
			h.netns = append(h.netns, e.Name())
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		h.links = append(h.links, i.Name)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				h.mounts = append(h.mounts, f[4])
			}
		}
	}
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(p, "/") > 7 {
			return filepath.SkipDir
		}
		if strings.Contains(d.Name(), id) {
			h.cgroups = append(h.cgroups, p)
		}
		return nil
	})
	filepath.WalkDir(stateDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			h.files = append(h.files, p)
		}
		return nil
	})
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range backing {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), stateDir+"/") {
			h.loops = append(h.loops, f+": "+strings.TrimSpace(string(b)))
		}
	}
	if out, err := exec.Command("nft", "list", "ruleset").Output(); err == nil {
		h.nft = string(out)
	}
	for _, l := range [][]string{h.netns, h.links, h.mounts, h.cgroups, h.files, h.loops} {
		sort.Strings(l)
	}
	return h
}

func (s *suite) testRemoveLeavesNothing(t *testing.T) {
	e := s.env(t)
	bind := t.TempDir()
	before := snapHost(t, e.stateDir, "leaves")
	spec := sandbox.Spec{ID: "leaves", Layers: []string{s.base},
		Disks: []sandbox.Disk{{Name: "claude", Target: "/var/lib/kndl/claude"}},
		Binds: []sandbox.Bind{{Source: bind, Target: "/workspace"}},
		Tmpfs: []sandbox.Tmpfs{{Target: "/run/kndl", Mode: 0o700}}}
	if err := e.b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Start(ctx, "leaves"); err != nil {
		e.b.Remove(ctx, "leaves")
		t.Fatal(err)
	}
	e.must("leaves", "echo x > /workspace/f && echo y > /var/lib/kndl/claude/f && (sleep 600 >/dev/null 2>&1 &)")
	during := snapHost(t, e.stateDir, "leaves")
	if fmt.Sprint(during) == fmt.Sprint(before) {
		t.Fatal("a running sandbox changes nothing on the host; the check below proves nothing")
	}
	if err := e.b.Remove(ctx, "leaves"); err != nil {
		t.Fatal(err)
	}
	sameHost(t, "after remove", before, snapHost(t, e.stateDir, "leaves"), true)
	if b, err := os.ReadFile(filepath.Join(bind, "f")); err != nil || string(b) != "x\n" {
		t.Errorf("the bind's file after remove: got %q, %v; want it kept", b, err)
	}
}

// testKeepDisks: a Sandbox removed keeping its disks leaves nothing else
// behind, and a new Sandbox under the same id (as a Runner makes for a
// restored Session) takes them back as they were, owners included, over a
// fresh root filesystem.
func (s *suite) testKeepDisks(t *testing.T) {
	e := s.env(t)
	kept := filepath.Join(t.TempDir(), "kept")
	if err := e.b.RemoveKeepingDisks(ctx, "nosuch", kept); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("keeping the disks of an unknown sandbox: got %v, want ErrNotFound", err)
	}
	before := snapHost(t, e.stateDir, "kept")
	disks := []sandbox.Disk{{Name: "claude", Target: "/var/lib/kndl/claude"}, {Name: "cache", Target: "/var/cache/kndl"}}
	id := e.sandbox(sandbox.Spec{ID: "kept", Disks: disks})
	e.must(id, "echo state > /var/lib/kndl/claude/f && echo u > /var/lib/kndl/claude/u && chown 1000:1000 /var/lib/kndl/claude/u && "+
		"echo c > /var/cache/kndl/c && echo upper > /root/f && (sleep 600 >/dev/null 2>&1 &)")
	if err := e.b.RemoveKeepingDisks(ctx, id, kept); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Status(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("status after removing it: got %v, want ErrNotFound", err)
	}
	sameHost(t, "after removing it, keeping its disks", before, snapHost(t, e.stateDir, "kept"), true)
	for i := range disks {
		disks[i].From = filepath.Join(kept, disks[i].Name)
		if _, err := os.Lstat(disks[i].From); err != nil {
			t.Fatalf("disk %s was not kept: %v", disks[i].Name, err)
		}
	}

	// A Create refused leaves them where they were.
	if err := e.b.Create(ctx, sandbox.Spec{ID: "kept", Layers: []string{s.base}, Disks: disks,
		Tmpfs: []sandbox.Tmpfs{{Target: disks[0].Target}}}); err == nil {
		t.Fatal("a Create with two mounts at one target: got no error")
	}
	for _, d := range disks {
		if _, err := os.Lstat(d.From); err != nil {
			t.Fatalf("disk %s after a refused Create: %v, want it kept", d.Name, err)
		}
	}

	id = e.sandbox(sandbox.Spec{ID: "kept", Disks: disks})
	got := e.must(id, "cat /var/lib/kndl/claude/f /var/cache/kndl/c; stat -c %u:%g /var/lib/kndl/claude/u; test -e /root/f && echo upper-kept || echo upper-fresh")
	if got != "state\nc\n1000:1000\nupper-fresh" {
		t.Errorf("the new Sandbox: got %q, want both disks as they were and a fresh root filesystem", got)
	}
	for _, d := range disks {
		if _, err := os.Lstat(d.From); err == nil {
			t.Errorf("disk %s is still at %s once a Sandbox took it back", d.Name, d.From)
		}
	}
}

func (s *suite) testFailedStart(t *testing.T) {
	e := s.env(t)
	src := filepath.Join(t.TempDir(), "bind")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Create(ctx, sandbox.Spec{ID: "fails", Layers: []string{s.base},
		Binds: []sandbox.Bind{{Source: src, Target: "/workspace"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Remove(ctx, "fails") })
	before := snapHost(t, e.stateDir, "fails")
	// The bind's source goes away between Create and Start.
	os.Remove(src)
	err := e.b.Start(ctx, "fails")
	if err == nil {
		t.Fatal("start with a missing bind source: got no error")
	}
	t.Logf("start with a missing bind source: %v", err)
	// A failed Start keeps the Sandbox's own records: its files may differ.
	sameHost(t, "after a failed start", before, snapHost(t, e.stateDir, "fails"), false)
	if st, err := e.b.Status(ctx, "fails"); err != nil || st.State == sandbox.StateRunning {
		t.Errorf("status after a failed start: got %+v, %v", st, err)
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Start(ctx, "fails"); err != nil {
		t.Errorf("start once the source is back: %v", err)
	}
}

func (s *suite) testRestart(t *testing.T) {
	e := s.env(t)
	id := e.sandbox(sandbox.Spec{ID: "restart"})
	marker := "kndl-restart-" + random()
	e.must(id, "(exec -a "+marker+" sleep 600 >/dev/null 2>&1 &)")
	// A second backend over the same state, as a restarted Runner makes.
	b2 := s.newBackend(t, e.stateDir)
	list, err := b2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].State != sandbox.StateRunning {
		t.Fatalf("list after restart: got %+v, want %s running", list, id)
	}
	e2 := *e
	e2.b = b2
	if got := e2.must(id, "pgrep -c -f '^"+marker+"'"); got != "1" {
		t.Errorf("the process started before the restart: got %s, want 1 running", got)
	}
	if err := b2.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testBadInput(t *testing.T) {
	e := s.env(t)
	tests := []struct {
		name string
		spec sandbox.Spec
	}{
		{"bad id", sandbox.Spec{ID: "Bad_ID", Layers: []string{s.base}}},
		{"long id", sandbox.Spec{ID: strings.Repeat("a", 41), Layers: []string{s.base}}},
		{"no layers", sandbox.Spec{ID: "x"}},
		{"missing layer", sandbox.Spec{ID: "x", Layers: []string{"/nonexistent/layer"}}},
		{"relative disk target", sandbox.Spec{ID: "x", Layers: []string{s.base}, Disks: []sandbox.Disk{{Name: "d", Target: "data"}}}},
		{"duplicate targets", sandbox.Spec{ID: "x", Layers: []string{s.base},
			Disks: []sandbox.Disk{{Name: "d", Target: "/data"}}, Tmpfs: []sandbox.Tmpfs{{Target: "/data"}}}},
		{"missing bind source", sandbox.Spec{ID: "x", Layers: []string{s.base}, Binds: []sandbox.Bind{{Source: "/nonexistent", Target: "/w"}}}},
		{"negative memory", sandbox.Spec{ID: "x", Layers: []string{s.base}, Resources: sandbox.Resources{MemoryMiB: -1}}},
	}
	for _, tc := range tests {
		if err := e.b.Create(ctx, tc.spec); err == nil {
			e.b.Remove(ctx, tc.spec.ID)
			t.Errorf("%s: got no error", tc.name)
		}
	}
	if list, _ := e.b.List(ctx); len(list) != 0 {
		t.Errorf("after bad input: got %+v, want no sandboxes", list)
	}
}

func (s *suite) testConcurrent(t *testing.T) {
	e := s.env(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		id := fmt.Sprintf("par-%d", i)
		t.Cleanup(func() { e.b.Remove(ctx, id) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.b.Create(ctx, sandbox.Spec{ID: id, Layers: []string{s.base}}); err != nil {
				errs <- err
				return
			}
			errs <- e.b.Start(ctx, id)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	addrs, maps := map[string]bool{}, map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("par-%d", i)
		addrs[e.addrOf(id)] = true
		maps[e.must(id, "cat /proc/self/uid_map")] = true
	}
	if s.opts.OwnKernel && len(maps) == 1 {
		// The backend kernel's uid_map says nothing of the host's ranges,
		// which the backend's own tests check.
		t.Logf("%d sandboxes show one uid_map, their kernel's own", n)
		maps = addrs
	}
	if len(addrs) != n || len(maps) != n {
		t.Errorf("%d sandboxes started together: got %d addresses and %d uid maps, want %d of each", n, len(addrs), len(maps), n)
	}
}
