package signin

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies whose X-Forwarded-For the Hub believes
// (HUB_TRUSTED_PROXIES). A peer outside them is the client itself,
// whatever it sends.
type Proxies []netip.Prefix

// Loopback is the default: a proxy on the Hub's own machine.
var Loopback = Proxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseProxies reads HUB_TRUSTED_PROXIES: a comma-separated list of CIDRs
// or addresses; "" is Loopback, and "none" trusts no proxy.
func ParseProxies(s string) (Proxies, error) {
	switch strings.TrimSpace(s) {
	case "":
		return Loopback, nil
	case "none":
		return Proxies{}, nil
	}
	var out Proxies
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q: want a CIDR such as 10.0.0.0/24 or an address such as 10.0.0.5, comma-separated, or none", f)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (ps Proxies) trusts(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Addr decides the address r comes from: the peer's, unless the peer is
// one of ps; then X-Forwarded-For is read from the right, each hop a
// trusted proxy appended, and the first hop that is not one of ps is the
// client. A client can write what it likes to the left of what its first
// trusted proxy appended, so nothing further left is believed. A hop that
// is no address (a proxy's mistake) ends the walk at the proxy that
// passed it on.
func (ps Proxies) Addr(r *http.Request) string {
	host := HostOf(r.RemoteAddr)
	peer, err := netip.ParseAddr(host)
	if err != nil || !ps.trusts(peer.Unmap()) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	addr := peer.Unmap()
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			break
		}
		addr = a.Unmap()
		if !ps.trusts(addr) {
			break
		}
	}
	return addr.String()
}

type addrKey struct{}

// Handler records each request's address, as ps decides it, for
// ClientAddr. The Hub puts it in front of everything it serves, so this is
// the one place a request's address is decided.
func (ps Proxies) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), addrKey{}, ps.Addr(r))))
	})
}

// ClientAddr is the address a request comes from, as the Proxies' Handler
// in front of the Hub decided it; for a request that came another way, the
// peer's own.
func ClientAddr(r *http.Request) string {
	if a, ok := r.Context().Value(addrKey{}).(string); ok {
		return a
	}
	return HostOf(r.RemoteAddr)
}
