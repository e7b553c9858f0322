package signin

import (
	"fmt"
	"net/url"
	"testing"
	"time"
)

func TestOriginOfDropsDefaultPorts(t *testing.T) {
	tests := map[string]string{
		"https://Kndl.Example.com:443/x": "https://kndl.example.com",
		"http://127.0.0.1:7380":          "http://127.0.0.1:7380",
		"http://example.com:80":          "http://example.com",
		"https://example.com:8443":       "https://example.com:8443",
	}
	for in, want := range tests {
		u, _ := url.Parse(in)
		if got := OriginOf(u); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTheLimiterCountsIPv6By64AndForgetsTheOldestWhenFull: the addresses
// of one IPv6 /64 share a bucket (an IPv4-mapped one counts as its IPv4),
// and a full table makes room by forgetting the address spent longest ago,
// never by not counting the new one.
func TestTheLimiterCountsIPv6By64AndForgetsTheOldestWhenFull(t *testing.T) {
	l := NewLimiter(2, time.Hour)
	l.Take("2001:db8:1:2::1")
	l.Take("2001:db8:1:2:ffff::9")
	if !l.Blocked("2001:db8:1:2::77") {
		t.Error("another address of a spent /64 is not limited")
	}
	if l.Blocked("2001:db8:1:3::1") {
		t.Error("the next /64 is limited")
	}
	l.Take("::ffff:192.0.2.1")
	l.Take("192.0.2.1")
	if !l.Blocked("192.0.2.1") {
		t.Error("an IPv4-mapped address counts apart from its IPv4")
	}

	l = NewLimiter(1, time.Hour)
	l.cap = 3
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		l.Take(a)
	}
	l.Take("192.0.2.1") // refused, and so the last one spent
	for i := range 2 {
		fresh := fmt.Sprintf("198.51.100.%d", i)
		if l.Take(fresh); !l.Blocked(fresh) {
			t.Fatalf("with the table full, %s was not counted", fresh)
		}
	}
	if got := len(l.m); got != 3 {
		t.Errorf("the table holds %d addresses, want its cap of 3", got)
	}
	if l.Blocked("192.0.2.2") || l.Blocked("192.0.2.3") {
		t.Error("the addresses spent longest ago are still remembered")
	}
	if !l.Blocked("192.0.2.1") {
		t.Error("the address that failed last was forgotten")
	}
}
