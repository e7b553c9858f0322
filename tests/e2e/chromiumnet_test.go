package e2e

import (
	"bufio"
	byteorder "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/testenv"
)

// chromiumNet is the network namespace the shared chromium runs in: its
// own loopback alone, on which a SOCKS5 proxy the test process serves
// leads every connection back to the host's network. The Sandboxes the
// tests start add and remove veths and addresses on the host all the
// time; chromium on the host's network took each for a network change
// and failed what it was loading with net::ERR_NETWORK_CHANGED (a page's
// script once, so the page never ran and its wait timed out). In a
// namespace of its own it sees none of them.
type chromiumNet struct {
	ns    *os.File     // the namespace, held open while chromium runs
	proxy net.Listener // on the namespace's loopback
}

// newChromiumNet makes the namespace and starts its proxy.
func newChromiumNet() (*chromiumNet, error) {
	type made struct {
		ns  *os.File
		ln  net.Listener
		err error
	}
	ch := make(chan made, 1)
	go func() {
		// The thread goes to the new namespace and back; it is unlocked
		// only once back, or the runtime would hand it to another
		// goroutine there (or, the main thread, show the namespace as the
		// process's own in /proc/self/ns/net).
		runtime.LockOSThread()
		var m made
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- made{err: err}
			return
		}
		defer host.Close()
		m.err = func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare a network namespace: %w", err)
			}
			h, err := netlink.NewHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			lo, err := h.LinkByName("lo")
			if err == nil {
				err = h.LinkSetUp(lo)
			}
			if err != nil {
				return fmt.Errorf("bring up the namespace's loopback: %w", err)
			}
			if m.ns, err = os.Open("/proc/thread-self/ns/net"); err != nil {
				return err
			}
			m.ln, err = net.Listen("tcp", "127.0.0.1:0")
			return err
		}()
		if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
			m.err = fmt.Errorf("back to the host's network namespace: %w", err) // the thread ends, locked
		} else {
			runtime.UnlockOSThread()
		}
		ch <- m
	}()
	m := <-ch
	if m.err != nil {
		if m.ns != nil {
			m.ns.Close()
		}
		if m.ln != nil {
			m.ln.Close()
		}
		return nil, m.err
	}
	n := &chromiumNet{ns: m.ns, proxy: m.ln}
	go n.serve()
	return n, nil
}

// options start chromium in the namespace (through nsenter, which takes
// it as an inherited descriptor) and send all of its traffic, loopback's
// too, through the proxy.
func (n *chromiumNet) options() ([]chromedp.ExecAllocatorOption, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("chromium runs in a network namespace of its own through nsenter (util-linux): %w", err)
	}
	return []chromedp.ExecAllocatorOption{
		chromedp.ProxyServer("socks5://" + n.proxy.Addr().String()),
		// Loopback is never proxied unless the list says so.
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			fd := 3 + len(cmd.ExtraFiles) // after the DevTools pipe's
			cmd.ExtraFiles = append(cmd.ExtraFiles, n.ns)
			cmd.Args = append([]string{nsenter, "--net=/proc/self/fd/" + strconv.Itoa(fd), "--", cmd.Path}, cmd.Args[1:]...)
			cmd.Path = nsenter
		}),
	}, nil
}

// close stops the proxy and lets the namespace go once chromium has.
func (n *chromiumNet) close() {
	n.proxy.Close()
	n.ns.Close()
}

func (n *chromiumNet) serve() {
	for {
		c, err := n.proxy.Accept()
		if err != nil {
			return
		}
		go socks5(c)
	}
}

// socks5 serves one SOCKS5 CONNECT (RFC 1928, no authentication): it
// dials the address asked for from the host's network and copies both
// ways.
func socks5(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	var hello [2]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil || hello[0] != 5 {
		return
	}
	if _, err := io.ReadFull(r, make([]byte, hello[1])); err != nil {
		return
	}
	c.Write([]byte{5, 0}) // no authentication
	reply := func(code byte) { c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0}) }
	var req [4]byte // version, command, reserved, address type
	if _, err := io.ReadFull(r, req[:]); err != nil || req[0] != 5 {
		return
	}
	if req[1] != 1 {
		reply(7) // command not supported
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make(net.IP, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(r, ip); err != nil {
			return
		}
		host = ip.String()
	case 3:
		n, err := r.ReadByte()
		name := make([]byte, n)
		if err != nil {
			return
		}
		if _, err := io.ReadFull(r, name); err != nil {
			return
		}
		host = string(name)
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			// As chromium resolves them itself (RFC 6761): an open port's
			// address is a name under localhost.
			host = "127.0.0.1"
		}
	default:
		reply(8) // address type not supported
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return
	}
	up, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(int(byteorder.BigEndian.Uint16(port[:])))), 10*time.Second)
	if err != nil {
		reply(5) // connection refused
		return
	}
	defer up.Close()
	reply(0)
	c.SetDeadline(time.Time{})
	go func() {
		io.Copy(up, r)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}

// TestTheBrowserRunsInANetworkNamespaceOfItsOwn: the shared chromium's
// network namespace is not the host's, so no veth or address a Sandbox's
// start adds there is a network change to it, and a page served on the
// host's loopback still loads, through its proxy.
func TestTheBrowserRunsInANetworkNamespaceOfItsOwn(t *testing.T) {
	testenv.RequireRoot(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><body><p>served on the host's loopback</p></body>`)
	}))
	defer srv.Close()
	b := NewBrowser(t)
	b.Go(srv.URL, "p")
	pid := chromedp.FromContext(b.ctx).Browser.Process().Pid
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if theirs == ours {
		t.Fatalf("chromium (pid %d) runs in the host's network namespace %s", pid, ours)
	}
}
