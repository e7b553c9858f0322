package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Ports are the destination ports the proxy passes: HTTP and HTTPS.
var Ports = []uint16{80, 443}

// sniffTimeout bounds the wait for a connection's first bytes.
const sniffTimeout = 10 * time.Second

// Proxy passes each connection a restricted Sandbox makes, sent to it by
// the Sandbox's firewall, on to the host its TLS SNI or HTTP Host names
// when the Sandbox's allowlist has it and the port is 80 or 443; it
// resets the rest, reporting each. It never terminates TLS.
type Proxy struct {
	// Policy returns the allowlist of the Sandbox at src; false for an
	// address that is no restricted Sandbox's, whose connections are
	// closed unreported.
	Policy func(src netip.Addr) (Matcher, bool)
	// Dial connects to host:port on the Sandbox's behalf (the Runner's
	// outbound.Dialer, which refuses the private ranges).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Blocked reports a refused connection: dest is host:port, or the
	// address it was sent to when no host could be read; host is the name
	// when the allowlist leaving it off is what refused it (listing it lets
	// the next through), "" for any other refusal.
	Blocked func(src netip.Addr, dest, why, host string)
	Log     *slog.Logger
}

// Serve accepts connections on ln until it is closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	return acceptEach(ln, func(c net.Conn) { p.handle(ctx, c.(*net.TCPConn)) })
}

// acceptEach handles each connection ln accepts on a goroutine of its
// own, until ln is closed; it returns once every one is handled.
func acceptEach(ln net.Listener, handle func(net.Conn)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c)
		}()
	}
}

func (p *Proxy) handle(ctx context.Context, c *net.TCPConn) {
	src := addrOf(c.RemoteAddr())
	m, ok := p.Policy(src)
	if !ok {
		c.Close()
		return
	}
	dst, err := OriginalDst(c)
	if err != nil {
		p.Log.Warn("egress proxy: no original destination", "from", src, "err", err)
		c.Close()
		return
	}
	refuse := func(dest, why, host string) {
		p.Blocked(src, dest, why, host)
		c.SetLinger(0) // a reset, so the client fails at once
		c.Close()
	}
	port := dst.Port()
	if !isProxied(port) {
		refuse(dst.String(), fmt.Sprintf("an allowlist opens HTTP and HTTPS, ports 80 and 443, not %d", port), "")
		return
	}
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	host, read, err := Sniff(c)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		refuse(dst.String(), err.Error(), "")
		return
	}
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if !m.Allows(host) {
		refuse(dest, "off the Environment's egress allowlist; kndl env edit --allow adds it", host)
		return
	}
	up, err := p.Dial(ctx, "tcp4", dest)
	if err != nil {
		refuse(dest, err.Error(), "")
		return
	}
	if _, err := up.Write(read); err != nil {
		up.Close()
		c.Close()
		return
	}
	splice(c, up.(*net.TCPConn))
}

// splice copies both ways until both are done, half-closing each side as
// its peer finishes writing.
func splice(a, b *net.TCPConn) {
	var wg sync.WaitGroup
	cp := func(dst, src *net.TCPConn) {
		defer wg.Done()
		io.Copy(dst, src)
		dst.CloseWrite()
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

func isProxied(port uint16) bool { return slices.Contains(Ports, port) }

func addrOf(a net.Addr) netip.Addr {
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// OriginalDst is where a connection was going before the firewall's DNAT
// sent it here (SO_ORIGINAL_DST, from conntrack).
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// A sockaddr_in, read through the one getsockopt of x/sys that
		// returns 16 bytes.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = fmt.Errorf("SO_ORIGINAL_DST: %w", err)
			return
		}
		b := mreq.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	})
	if err == nil {
		err = serr
	}
	return dst, err
}
