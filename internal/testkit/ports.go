package testkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Where Ports claims: below the kernel's ephemeral range (32768 to 60999
// on Linux by default), which bind(":0") and connect() draw from, so no
// socket the kernel numbers itself takes a claimed port; only one bound
// to it by number, which Ports checks for. portsStep is a claim's size at
// most.
const (
	portsFrom = 20000
	portsTo   = 32000
	portsStep = 4
)

// Ports claims n consecutive ports (n <= 4), TCP and UDP, on every
// address, for the test's life, and returns the first: a Runner's relay
// port, whose next two are its egress proxy's and DNS server's, or a port
// a process of the test listens on by number. A claim is a lock file held
// host-wide (so two tests side by side, in this process or another, never
// get the same ports), and each port is checked free on the wildcard
// address when claimed; picking a free port with ":0" and closing it left
// it to whatever socket the kernel numbered next.
func Ports(t testing.TB, n int) int {
	t.Helper()
	if n < 1 || n > portsStep {
		t.Fatalf("Ports(%d): claims 1 to %d ports", n, portsStep)
	}
	dir := "/tmp/kndl-test-ports" // one place for every process, whatever its TMPDIR
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	blocks := (portsTo - portsFrom) / portsStep
	var inUse []string
	for try := 0; try < 50; try++ {
		base := portsFrom + rand.IntN(blocks)*portsStep
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(base)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				t.Fatal(err)
			}
			continue // another test's
		}
		if err := portsFree(base, n); err != nil {
			f.Close()
			inUse = append(inUse, err.Error())
			continue
		}
		t.Cleanup(func() { f.Close() })
		return base
	}
	t.Fatalf("no %d free ports claimed in 50 tries between %d and %d; in use: %q", n, portsFrom, portsTo, inUse)
	return 0
}

// portsFree checks that n ports from base can be bound, TCP and UDP, on
// the wildcard address (which any address's socket on the port keeps from
// binding).
func portsFree(base, n int) error {
	for p := base; p < base+n; p++ {
		addr := fmt.Sprintf(":%d", p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		pc.Close()
	}
	return nil
}
