// Package outbound is the one way the Hub and a Runner connect somewhere
// on someone's behalf: the Gateway's requests to MCP servers and their
// authorization servers, a Runner's image pulls and its host clone. Its
// Dialer refuses the ranges no Sandbox reaches either (RefusedV4, which the
// Sandbox's egress firewall reads too, and RefusedV6), judged on each
// address it is about to connect to, after DNS, so a name that resolves to
// a cloud's metadata service is refused, on a redirect or a reconnect as
// on the first request. An operator opens a range on purpose (Allow). The
// Hub, the Runner, internal/gateway, internal/ociimage and the Sandbox
// backends import it.
package outbound

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// RefusedV4 are the IPv4 ranges neither a Sandbox nor the Hub or a Runner
// on someone's behalf reaches: "this" network, private, shared
// (carrier-grade NAT, where Alibaba's metadata lives), loopback,
// link-local (cloud metadata), IETF protocol assignments (Oracle's
// metadata), the benchmarking range, Azure's wireserver, and multicast and
// reserved. The documentation ranges (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24) are not in it: some networks route real services there
// (measured: a package mirror). A Sandbox backend also keeps Sandboxes
// from one another and from the host, and refuses IPv6 whole.
var RefusedV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("168.63.129.16/32"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/3"),
}

// RefusedV6 are the IPv6 ranges of the same kinds: unspecified and
// loopback (with the deprecated IPv4-compatible form around them),
// local-use NAT64, discard-only, unique local (fc00::/7, where AWS's
// metadata fd00:ec2::254 lives), link-local, site-local and multicast. An
// address that carries an IPv4 one (IPv4-mapped, NAT64's well-known
// prefix, 6to4) is judged by the IPv4 address it carries.
var RefusedV6 = []netip.Prefix{
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// metadata are the cloud metadata services: a range that holds one never
// opens it (Allow), only an entry naming the address itself does.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, Google Cloud, Azure, Oracle, most others
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task credentials
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure's wireserver
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// Loopback is the Allow kndl dev gives its Hub and Runner by default:
// they are one machine's, and its MCP servers and registries are often on
// it.
const Loopback = "127.0.0.0/8,::1"

// AllowLoopback is Loopback as an Allow, for kndl dev's like in tests.
var AllowLoopback, _ = ParseAllow(Loopback)

// Allow is what an operator opens on purpose: ranges (any port), addresses
// with a port, and names with a port (whatever they resolve to). The zero
// Allow opens nothing.
type Allow struct {
	nets  []netip.Prefix
	ends  []netip.AddrPort
	names []string // host:port, the host lowercased
}

// ParseAllow reads a comma-separated list of CIDRs (10.0.0.0/8), addresses
// (10.1.2.3, ::1) and host:port (registry.internal:5000, 10.1.2.3:443,
// [fd00::1]:443), as HUB_OUTBOUND_ALLOW and RUNNER_OUTBOUND_ALLOW take it.
func ParseAllow(s string) (Allow, error) {
	var a Allow
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(e)
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || n == 0 || host == "" {
			return Allow{}, fmt.Errorf("%q: want a CIDR such as 10.0.0.0/8, an address, or host:port such as registry.internal:5000", e)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			a.ends = append(a.ends, netip.AddrPortFrom(ip.Unmap(), uint16(n)))
			continue
		}
		a.names = append(a.names, net.JoinHostPort(canonical(host), port))
	}
	return a, nil
}

// canonical is a host name as Allow compares it.
func canonical(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// opens reports whether a opens addr on port. A range opens no metadata
// service it holds; an entry that names the address does.
func (a Allow) opens(addr netip.Addr, port uint16) bool {
	named := slices.Contains(a.ends, netip.AddrPortFrom(addr, port)) ||
		slices.Contains(a.nets, netip.PrefixFrom(addr, addr.BitLen()))
	if named || slices.Contains(metadata, addr) {
		return named
	}
	return slices.ContainsFunc(a.nets, func(p netip.Prefix) bool { return p.Contains(addr) })
}

// Resolver finds a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only to addresses outside the refused ranges, or that
// its Allow opens.
type Dialer struct {
	Allow Allow
	// Setting names where Allow comes from (HUB_OUTBOUND_ALLOW), for the
	// errors that say how to open an address.
	Setting string
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver Resolver
	// Connect connects to an address already checked; nil is a
	// net.Dialer with a 30 s timeout.
	Connect func(ctx context.Context, network, address string) (net.Conn, error)
}

// RefusedError is a connection the Dialer refused, before any packet was
// sent. It is an errdefs.ErrForbidden.
type RefusedError struct {
	Host    string
	Addr    netip.Addr
	Range   netip.Prefix
	Setting string
}

func (e *RefusedError) Error() string {
	at := e.Addr.String()
	if e.Host != at {
		at = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	msg := fmt.Sprintf("%s is in %s, which no request made on someone's behalf reaches", at, e.Range)
	if e.Setting != "" {
		msg += " unless " + e.Setting + " opens it"
	}
	return msg
}

func (e *RefusedError) Unwrap() error { return errdefs.ErrForbidden }

// Check returns a *RefusedError for an address a Dialer would refuse on
// port, nil otherwise. An address that carries an IPv4 one is judged by it.
func (d *Dialer) Check(host string, addr netip.Addr, port uint16) error {
	addr = addr.WithZone("")
	if d.Allow.opens(addr.Unmap(), port) {
		return nil
	}
	v4 := carried(addr)
	if v4 != addr && d.Allow.opens(v4, port) {
		return nil
	}
	table := RefusedV6
	if v4.Is4() {
		table = RefusedV4
	}
	if i := slices.IndexFunc(table, func(p netip.Prefix) bool { return p.Contains(v4) }); i >= 0 {
		return &RefusedError{Host: host, Addr: addr, Range: table[i], Setting: d.Setting}
	}
	return nil
}

// carried is the IPv4 address an IPv6 one carries (IPv4-mapped, NAT64's
// well-known prefix, 6to4), or addr itself.
func carried(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if !addr.Is6() {
		return addr
	}
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return addr
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// DialContext resolves address's host and connects to the first of its
// addresses that Check passes and that answers. It fails with the first
// *RefusedError when Check passes none, having sent nothing. A host:port
// the Allow names is connected to at whatever it resolves to.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	addrs, err := d.Resolve(ctx, network, host, uint16(port))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		var c net.Conn
		if c, err = d.connect(ctx, network, netip.AddrPortFrom(a, uint16(port)).String()); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// Resolve returns the addresses of host (of network's family: tcp, tcp4,
// tcp6) that a connection to port may go to, or the first *RefusedError
// when there are none.
func (d *Dialer) Resolve(ctx context.Context, network, host string, port uint16) ([]netip.Addr, error) {
	addrs, err := d.resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if slices.Contains(d.Allow.names, net.JoinHostPort(canonical(host), strconv.Itoa(int(port)))) {
		return addrs, nil
	}
	var passed []netip.Addr
	var refused error
	for _, a := range addrs {
		if err := d.Check(host, a, port); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		passed = append(passed, a)
	}
	if len(passed) == 0 {
		return nil, cmp.Or(refused, fmt.Errorf("%s has no address", host))
	}
	return passed, nil
}

// resolve is host's addresses of network's family: host itself when it
// is an address.
func (d *Dialer) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	family := "ip"
	switch network {
	case "tcp4", "udp4":
		family = "ip4"
	case "tcp6", "udp6":
		family = "ip6"
	}
	var r Resolver = net.DefaultResolver
	if d.Resolver != nil {
		r = d.Resolver
	}
	return r.LookupNetIP(ctx, family, host)
}

func (d *Dialer) connect(ctx context.Context, network, address string) (net.Conn, error) {
	if d.Connect != nil {
		return d.Connect(ctx, network, address)
	}
	nd := net.Dialer{Timeout: 30 * time.Second}
	return nd.DialContext(ctx, network, address)
}

// Transport is an HTTP transport that connects only through d, and never
// through a proxy from the environment, which would connect to addresses
// d never sees.
func (d *Dialer) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy, t.DialContext = nil, d.DialContext
	return t
}
