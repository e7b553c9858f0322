package signin

import (
	"container/list"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Failed sign-ins and credential guesses per address: a burst, then one
// more every refill. Starting CLI logins is limited the same way.
const (
	FailBurst   = 20
	FailRefill  = 3 * time.Second
	StartBurst  = 10
	StartRefill = 30 * time.Second
	// limiterCap bounds how many addresses are remembered at once.
	limiterCap = 100_000
)

// Limiter is a token bucket per address, counting only what it is told
// to: a right credential is let in whatever its address did before, so
// junk from one address (a NAT, a Runner's machine) never locks out the
// Runners, Sessions and people behind it. IPv6 addresses count by their
// /64, which one host usually has whole. When the table is full the entry
// spent longest ago is forgotten: the limit never switches off.
type Limiter struct {
	mu     sync.Mutex
	burst  float64
	refill time.Duration
	cap    int
	m      map[string]*list.Element // of *bucket, by limitKey
	order  list.List                // least recently spent at the back
}

type bucket struct {
	key    string
	tokens float64
	at     time.Time
}

// NewLimiter makes a Limiter of burst attempts, one more every refill.
func NewLimiter(burst int, refill time.Duration) *Limiter {
	return &Limiter{burst: float64(burst), refill: refill, cap: limiterCap, m: map[string]*list.Element{}}
}

// limitKey is what addr counts as: itself, or for IPv6 its /64.
func limitKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}

// level returns key's tokens brought up to now, a full burst for one it
// doesn't remember; call with l.mu held.
func (l *Limiter) level(key string, now time.Time) float64 {
	e := l.m[key]
	if e == nil {
		return l.burst
	}
	b := e.Value.(*bucket)
	return min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
}

// Blocked reports whether addr has used up its attempts.
func (l *Limiter) Blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level(limitKey(addr), time.Now()) < 1
}

// Take spends one of addr's attempts, and reports whether it had one: a
// failure from an address that had none left is refused as too many.
func (l *Limiter) Take(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key, now := limitKey(addr), time.Now()
	tokens := l.level(key, now)
	e := l.m[key]
	if tokens < 1 {
		l.order.MoveToFront(e) // still failing: the last to forget
		return false
	}
	if e == nil {
		if len(l.m) >= l.cap {
			oldest := l.order.Back()
			delete(l.m, oldest.Value.(*bucket).key)
			l.order.Remove(oldest)
		}
		e = l.order.PushFront(&bucket{key: key})
		l.m[key] = e
	}
	b := e.Value.(*bucket)
	b.tokens, b.at = tokens-1, now
	l.order.MoveToFront(e)
	return true
}

// Prune forgets addresses whose buckets are full again.
func (l *Limiter) Prune() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for key, e := range l.m {
		if l.level(key, now) >= l.burst {
			delete(l.m, key)
			l.order.Remove(e)
		}
	}
}

// HostOf is the host of host:port (or the whole string without a port).
func HostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}

// IsLoopbackHost reports whether host names this machine's loopback.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// OriginOf is a URL's origin as a browser sends it in Origin: scheme and
// host, without a default port.
func OriginOf(u *url.URL) string {
	host := strings.ToLower(u.Host)
	if (u.Scheme == "https" && strings.HasSuffix(host, ":443")) || (u.Scheme == "http" && strings.HasSuffix(host, ":80")) {
		host = host[:strings.LastIndex(host, ":")]
	}
	return strings.ToLower(u.Scheme) + "://" + host
}
