package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTTL is how long a Sandbox may keep an answer: short, so an address
// change on the host's side reaches it soon.
const dnsTTL = 30

// resolveTimeout bounds one lookup on the Runner's side.
const resolveTimeout = 5 * time.Second

// DNS answers a restricted Sandbox's queries, which its firewall sends here
// whatever server they were for: an allowed name's IPv4 addresses as the
// Runner resolves them, no IPv6 (Sandboxes have none), and NXDOMAIN for any
// other name, reported. A name not on the list is never asked of any other
// server, so no query carries data out.
type DNS struct {
	// Policy is the Proxy's.
	Policy func(src netip.Addr) (Matcher, bool)
	// Resolve returns host's IPv4 addresses (the Runner's
	// outbound.Dialer's Resolve, which leaves out the refused ranges).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Blocked reports a refused name.
	Blocked func(src netip.Addr, name string)
	Log     *slog.Logger
}

// ServeUDP answers queries on pc until it is closed.
func (d *DNS) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		q := append([]byte(nil), buf[:n]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out := d.answer(ctx, addrOf(from), q); out != nil {
				pc.WriteTo(out, from)
			}
		}()
	}
}

// ServeTCP answers queries over TCP (RFC 7766's two-byte length before
// each message) on ln until it is closed.
func (d *DNS) ServeTCP(ctx context.Context, ln net.Listener) error {
	return acceptEach(ln, func(c net.Conn) {
		defer c.Close()
		src := addrOf(c.RemoteAddr())
		for {
			c.SetReadDeadline(time.Now().Add(sniffTimeout))
			var n uint16
			if binary.Read(c, binary.BigEndian, &n) != nil {
				return
			}
			q := make([]byte, n)
			if _, err := io.ReadFull(c, q); err != nil {
				return
			}
			out := d.answer(ctx, src, q)
			if out == nil {
				return
			}
			if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(out)))); err != nil {
				return
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

// answer returns the reply to query q from src, nil for none (a source
// that is no restricted Sandbox's, or no DNS message).
func (d *DNS) answer(ctx context.Context, src netip.Addr, q []byte) []byte {
	m, ok := d.Policy(src)
	if !ok {
		return nil
	}
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return nil
	}
	reply := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true}, Questions: qs}
	switch {
	case len(qs) != 1 || qs[0].Class != dnsmessage.ClassINET:
		reply.RCode = dnsmessage.RCodeNotImplemented
	case !m.Allows(qs[0].Name.String()):
		name := strings.TrimSuffix(qs[0].Name.String(), ".")
		d.Blocked(src, name)
		reply.RCode = dnsmessage.RCodeNameError
	case qs[0].Type == dnsmessage.TypeA:
		reply.Answers, reply.RCode = d.lookup(ctx, qs[0])
	default:
		// AAAA and the rest: the name is there, with nothing of that type.
	}
	out, err := reply.Pack()
	if err != nil {
		return nil
	}
	return out
}

func (d *DNS) lookup(ctx context.Context, q dnsmessage.Question) ([]dnsmessage.Resource, dnsmessage.RCode) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := d.Resolve(ctx, strings.TrimSuffix(q.Name.String(), "."))
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return nil, dnsmessage.RCodeNameError
	case err != nil:
		d.Log.Info("egress dns: lookup failed", "name", q.Name.String(), "err", err)
		return nil, dnsmessage.RCodeServerFailure
	}
	var rs []dnsmessage.Resource
	for _, a := range addrs {
		if a = a.Unmap(); a.Is4() {
			rs = append(rs, dnsmessage.Resource{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL},
				Body:   &dnsmessage.AResource{A: a.As4()}})
		}
	}
	return rs, dnsmessage.RCodeSuccess
}
