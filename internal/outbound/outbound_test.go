package outbound_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/testkit"
)

// refusedAddrs has one address in each refused range, and the forms of
// IPv6 that carry a refused IPv4 address.
var refusedAddrs = []string{
	"0.1.2.3", "10.1.2.3", "100.64.0.1", "100.100.100.200", "127.0.0.1", "127.8.9.10", "168.63.129.16",
	"169.254.169.254", "169.254.1.1", "172.16.0.1", "172.31.255.254", "192.0.0.192", "192.168.1.1",
	"198.18.0.1", "198.19.255.1", "224.0.0.1", "239.1.2.3", "240.0.0.1", "255.255.255.255",
	"::", "::1", "::10.0.0.1", "64:ff9b:1::1", "100::1", "fc00::1", "fd00:ec2::254", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1",
	"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1",
}

var publicAddrs = []string{"8.8.8.8", "1.1.1.1", "140.82.112.3", "192.0.2.1", "203.0.113.7", "100.128.0.1", "172.32.0.1",
	"2001:4860:4860::8888", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"}

// TestTheDialerRefusesEveryRangeOfTheTable: each refused range, and each
// IPv6 form that carries a refused IPv4 address, is refused; public
// addresses are not.
func TestTheDialerRefusesEveryRangeOfTheTable(t *testing.T) {
	d := &outbound.Dialer{Setting: "HUB_OUTBOUND_ALLOW"}
	for _, s := range refusedAddrs {
		err := d.Check(s, netip.MustParseAddr(s), 443)
		var re *outbound.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, errdefs.ErrForbidden) {
			t.Errorf("%s: got %v, want a refusal", s, err)
		}
	}
	for _, s := range publicAddrs {
		if err := d.Check(s, netip.MustParseAddr(s), 443); err != nil {
			t.Errorf("%s: got %v, want it passed", s, err)
		}
	}
	// Every range of the table holds one of the addresses above.
	for _, p := range append(slices.Clone(outbound.RefusedV4), outbound.RefusedV6...) {
		if !slices.ContainsFunc(refusedAddrs, func(s string) bool { return p.Contains(netip.MustParseAddr(s).WithZone("")) }) {
			t.Errorf("no test address in %s", p)
		}
	}
}

// TestAnAllowOpensWhatItNamesAndNoMetadataServiceByItsRange: a CIDR opens
// its range on every port, an address:port one port, a host:port that name
// whatever it resolves to; a range that holds a metadata service opens the
// rest of it, not the service, which only naming its address opens.
func TestAnAllowOpensWhatItNamesAndNoMetadataServiceByItsRange(t *testing.T) {
	allow, err := outbound.ParseAllow(" 10.0.0.0/8, 127.0.0.1 ,192.168.1.5:5000,[fd00::1]:443, Registry.Internal.:5000,169.254.0.0/16,100.100.100.200/32")
	if err != nil {
		t.Fatal(err)
	}
	d := &outbound.Dialer{Allow: allow}
	tests := []struct {
		addr string
		port uint16
		open bool
	}{
		{"10.9.8.7", 1, true},
		{"::ffff:10.9.8.7", 80, true},
		{"127.0.0.1", 8080, true},
		{"127.0.0.2", 8080, false},
		{"192.168.1.5", 5000, true},
		{"192.168.1.5", 5001, false},
		{"fd00::1", 443, true},
		{"fd00::2", 443, false},
		{"169.254.1.1", 80, true},
		{"169.254.169.254", 80, false},
		{"100.100.100.200", 80, true},
		{"100.64.0.1", 80, false},
		{"172.16.0.1", 80, false},
	}
	for _, tt := range tests {
		err := d.Check(tt.addr, netip.MustParseAddr(tt.addr), tt.port)
		if (err == nil) != tt.open {
			t.Errorf("%s port %d: got %v, want open %v", tt.addr, tt.port, err, tt.open)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "registry", "host:0", "host:http", ":443", "10.0.0.1:99999"} {
		if _, err := outbound.ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) took it", bad)
		}
	}
}

// TestANameIsJudgedByTheAddressesItResolvesTo: a name that resolves into a
// refused range is refused before any connection is made, one that
// resolves to both is connected at its allowed address only, and a
// host:port the Allow names is connected as named.
func TestANameIsJudgedByTheAddressesItResolvesTo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	allow, _ := outbound.ParseAllow("127.0.0.1/32,named.test:" + strconv.Itoa(port))
	var names testkit.Resolver
	names.Set("metadata.test", "169.254.169.254")
	names.Set("private.test", "10.0.0.5", "fd12::5")
	names.Set("mixed.test", "169.254.169.254", "127.0.0.1")
	names.Set("named.test", "127.0.0.1")
	var dials testkit.Dials
	d := &outbound.Dialer{Allow: allow, Setting: "HUB_OUTBOUND_ALLOW", Resolver: &names, Connect: dials.Connect}
	for _, host := range []string{"metadata.test", "private.test", "169.254.169.254", "[::ffff:127.0.0.2]"} {
		_, err := d.DialContext(context.Background(), "tcp", host+":"+strconv.Itoa(port))
		var re *outbound.RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s: got %v, want a refusal", host, err)
		} else if want := "HUB_OUTBOUND_ALLOW"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the refusal %q does not say %s opens it", host, err, want)
		}
	}
	if got := dials.All(); len(got) != 0 {
		t.Fatalf("refused names were dialed: %v", got)
	}
	for _, host := range []string{"mixed.test", "named.test", "127.0.0.1"} {
		c, err := d.DialContext(context.Background(), "tcp", host+":"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		c.Close()
	}
	want := "127.0.0.1:" + strconv.Itoa(port)
	if got := dials.All(); len(got) != 3 || slices.ContainsFunc(got, func(s string) bool { return s != want }) {
		t.Errorf("dialed %v, want %s three times", got, want)
	}
}

// TestTheProxyTunnelsAndForwardsOnlyThroughItsDialer: a client of the
// Proxy (git, for the host clone) reaches an https server through a
// CONNECT tunnel and an http one through forwarding, each by a name the
// Dialer resolves and checks; a name that resolves into a refused range is
// answered 403 over either, and the Proxy keeps that refusal for its
// caller.
func TestTheProxyTunnelsAndForwardsOnlyThroughItsDialer(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	tlsSrv, plain := httptest.NewTLSServer(hello), httptest.NewServer(hello)
	t.Cleanup(tlsSrv.Close)
	t.Cleanup(plain.Close)
	var names testkit.Resolver
	names.Set("near.test", "127.0.0.1")
	names.Set("metadata.test", "169.254.169.254")
	var dials testkit.Dials
	d := &outbound.Dialer{Allow: outbound.AllowLoopback, Setting: "RUNNER_OUTBOUND_ALLOW", Resolver: &names, Connect: dials.Connect}
	p, err := d.ListenProxy(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	proxyURL, _ := url.Parse(p.URL)
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	tr.TLSClientConfig.ServerName = "example.com" // the test certificate's name
	c := &http.Client{Transport: tr}
	port := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Port() }
	for _, u := range []string{"https://near.test:" + port(tlsSrv) + "/", "http://near.test:" + port(plain) + "/"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello" {
			t.Errorf("%s: got %d %q, want hello", u, resp.StatusCode, b)
		}
	}
	if p.Refused() != nil {
		t.Fatalf("a refusal before any: %v", p.Refused())
	}
	if resp, err := c.Get("http://metadata.test:" + port(plain) + "/"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("http to the metadata address: %v %v, want 403", resp, err)
	}
	if _, err := c.Get("https://metadata.test:" + port(tlsSrv) + "/"); err == nil {
		t.Error("https to the metadata address went through")
	}
	var re *outbound.RefusedError
	if !errors.As(p.Refused(), &re) || re.Addr != netip.MustParseAddr("169.254.169.254") {
		t.Errorf("the Proxy's refusal: %v", p.Refused())
	}
	for _, a := range dials.All() {
		if ap, err := netip.ParseAddrPort(a); err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("connected to %s", a)
		}
	}
}
