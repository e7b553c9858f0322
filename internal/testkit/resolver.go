package testkit

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Resolver answers names from what the test sets, so a name can resolve
// anywhere, into a refused range too, with no real DNS asked and nothing
// sent there: an outbound.Dialer's Resolver.
type Resolver struct {
	mu sync.Mutex
	m  map[string][]netip.Addr
}

// Set makes host resolve to addrs.
func (r *Resolver) Set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]netip.Addr{}
	}
	r.m[host] = nil
	for _, a := range addrs {
		r.m[host] = append(r.m[host], netip.MustParseAddr(a))
	}
}

// LookupNetIP answers host as Set said, or "no such host".
func (r *Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.m[host]; ok {
		return slices.Clone(a), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Dials connects for real and records each address it connected to: an
// outbound.Dialer's Connect, for a test that checks where it went.
type Dials struct {
	mu  sync.Mutex
	all []string
}

func (d *Dials) Connect(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.all = append(d.all, address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// All is every address connected to, in order.
func (d *Dials) All() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.all)
}
