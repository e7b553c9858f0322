package ports

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in   string
		addr string
		port int
	}{
		{"0100007F:1F90", "127.0.0.1", 8080},
		{"00000000:0016", "0.0.0.0", 22},
		{"00000000000000000000000001000000:0BB8", "::1", 3000},
		{"00000000000000000000000000000000:0050", "::", 80},
		{"0000000000000000FFFF00000100007F:1F90", "127.0.0.1", 8080}, // v4-mapped
	}
	for _, tt := range tests {
		addr, port, err := parseAddr(tt.in)
		if err != nil || addr != tt.addr || port != tt.port {
			t.Errorf("parseAddr(%q) = %s %d %v, want %s %d", tt.in, addr, port, err, tt.addr, tt.port)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:XYZ", "01007F:1F90", "zz00007F:1F90"} {
		if _, _, err := parseAddr(bad); err == nil {
			t.Errorf("parseAddr(%q) took it", bad)
		}
	}
}

// listen opens a listener on addr and closes it when the test ends.
func listen(t *testing.T, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }() // echo
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func find(list []protocol.Port, port int) *protocol.Port {
	for i := range list {
		if list[i].Port == port {
			return &list[i]
		}
	}
	return nil
}

func TestListNamesEachPortOnceWithItsAddressesAndHolder(t *testing.T) {
	port := listen(t, "127.0.0.1:0")
	listen(t, net.JoinHostPort("::1", strconv.Itoa(port)))
	list, err := List(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := find(list, port)
	if p == nil {
		t.Fatalf("port %d missing from %v", port, list)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	if want := []string{"127.0.0.1", "::1"}; strings.Join(p.Addresses, ",") != strings.Join(want, ",") || p.PID != os.Getpid() || p.Process != strings.TrimSpace(string(comm)) {
		t.Fatalf("got %+v, want addresses %v, pid %d, process %s", *p, want, os.Getpid(), comm)
	}
	exe, _ := os.Executable()
	list, _ = List(Options{SkipExe: filepath.Dir(exe)})
	if find(list, port) != nil {
		t.Fatalf("port %d held by a skipped executable is listed", port)
	}
	list, _ = List(Options{SkipPID: os.Getpid()})
	if find(list, port) != nil {
		t.Fatalf("port %d held by the skipped process is listed", port)
	}
}

type lines struct {
	ch chan []protocol.Port
}

func (l lines) Write(p []byte) (int, error) {
	d := NewDecoder(bytes.NewReader(p))
	for {
		list, err := d.Next()
		if err != nil {
			return len(p), nil
		}
		l.ch <- list
	}
}

func TestWatchWritesTheWholeListWhenItChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lines{make(chan []protocol.Port, 10)}
	stdinR, stdinW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, Options{}, 50*time.Millisecond, stdinR, out) }()
	next := func(what string) []protocol.Port {
		t.Helper()
		select {
		case l := <-out.ch:
			return l
		case <-time.After(testenv.WaitShort):
			t.Fatalf("no list: %s", what)
			return nil
		}
	}
	first := next("at start")
	port := listen(t, "127.0.0.1:0")
	for l := next("after a listener opened"); find(l, port) == nil; l = next("after a listener opened") {
	}
	if len(first) > 0 && find(first, port) != nil {
		t.Fatal("the new port was in the first list")
	}
	stdinW.Close() // the Runner went away
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("Watch did not end when stdin closed")
	}
}

func TestDialCarriesOneConnection(t *testing.T) {
	port := listen(t, "127.0.0.1:0")
	var out bytes.Buffer
	err := Dial(context.Background(), Options{}, port, strings.NewReader("ping"), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), DialReady+"\nping"; got != want {
		t.Fatalf("got %q, want %q: the ready line, then the echo", got, want)
	}
	// A port nothing listens on: one just closed.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	out.Reset()
	if err := Dial(context.Background(), Options{}, free, strings.NewReader(""), &out); err == nil || out.Len() > 0 {
		t.Fatalf("dialling a closed port: %v, wrote %q", err, out.String())
	}
}

// sock_diag, which Watch reads where the kernel has it, must name the same
// listeners as /proc/net/tcp{,6}, which it reads where not (gVisor).
func TestSockDiagNamesWhatProcNetNames(t *testing.T) {
	listen(t, "127.0.0.1:0")
	listen(t, "0.0.0.0:0")
	listen(t, "[::1]:0")
	listen(t, "[::]:0")
	diag, err := diagListeners()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("sock_diag: %v", err)
		}
		t.Skipf("this kernel has no sock_diag: %v", err)
	}
	proc, err := procSockets("/proc")
	if err != nil {
		t.Fatal(err)
	}
	key := func(s []socket) []string {
		var out []string
		for _, x := range s {
			out = append(out, net.JoinHostPort(x.addr, strconv.Itoa(x.port))+" "+x.inode)
		}
		slices.Sort(out)
		return out
	}
	if d, p := key(diag), key(proc); !slices.Equal(d, p) || len(d) < 4 {
		t.Fatalf("sock_diag found\n%s\n/proc/net found\n%s", strings.Join(d, "\n"), strings.Join(p, "\n"))
	}
}

func BenchmarkListeners(b *testing.B) {
	b.Run("sock_diag", func(b *testing.B) {
		for b.Loop() {
			if _, err := diagListeners(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			if _, err := procSockets("/proc"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
