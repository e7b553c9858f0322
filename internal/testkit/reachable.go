package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"kndl.dev/kndl/internal/testenv"
)

// ListenForSandboxes listens where a Sandbox reaches a fake as it would a
// service on the internet: on an address of 203.0.113.0/24 (TEST-NET-3,
// outside outbound.RefusedV4) in a network namespace of the test's own,
// which the host routes to over a veth pair, so a Sandbox's traffic there
// is forwarded as egress, past the firewall that keeps it from the host.
// The host's end has no address of its own, so the address is not one of
// the host's connected networks, which Sandboxes are kept from. The host
// reaches it too. It needs root and ip.
func ListenForSandboxes(t testing.TB) net.Listener {
	t.Helper()
	return ListenForSandboxesOn(t, 0)[0]
}

// ListenForSandboxesOn is ListenForSandboxes on each of ports (0: any
// free one), all on the one address: a service on well-known ports, such
// as HTTPS's 443.
func ListenForSandboxesOn(t testing.TB, ports ...int) []net.Listener {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip")
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	tag := make([]byte, 3)
	rand.Read(tag)
	ns, hostEnd := "kndl-fake-"+hex.EncodeToString(tag), "kfh"+hex.EncodeToString(tag)
	if err := ip("netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if err := ip("link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostEnd).Run() })
	if err := ip("link", "set", hostEnd, "up"); err != nil {
		t.Fatal(err)
	}
	// An address picked at random, so tests side by side rarely meet; one
	// another test routes already fails at its route and is tried again.
	var addr string
	for try := 0; addr == ""; try++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(253))
		a := fmt.Sprintf("203.0.113.%d", n.Int64()+1)
		err := ip("route", "add", a+"/32", "dev", hostEnd)
		if err == nil {
			addr = a
		} else if try == 5 {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "addr", "add", addr + "/32", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		// Everything is on the link: the host's end answers ARP for the
		// host's addresses, a Sandbox's masqueraded one among them.
		{"-n", ns, "route", "add", "default", "dev", "eth0"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	var lns []net.Listener
	for _, port := range ports {
		ln, err := listenInNetns(ns, net.JoinHostPort(addr, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	return lns
}

// listenInNetns opens a listener inside the network namespace ns: the
// socket stays there, whichever thread accepts on it later. The thread that
// entered ns is thrown away, so no other goroutine runs in it.
func listenInNetns(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{nil, err}
			return
		}
		ln, err := net.Listen("tcp4", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}
