package signin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestTheClientAddressIsTheRightmostHopNoTrustedProxyAdded: a request's
// address is its peer's unless the peer is a trusted proxy; then it is the
// rightmost X-Forwarded-For hop that is not one, so a client writing its
// own X-Forwarded-For picks nothing, and an untrusted peer's header is
// ignored whole.
func TestTheClientAddressIsTheRightmostHopNoTrustedProxyAdded(t *testing.T) {
	proxies, err := ParseProxies("10.0.0.0/24, 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	none, _ := ParseProxies("none")
	tests := []struct {
		name    string
		proxies Proxies
		peer    string
		xff     []string
		want    string
	}{
		{"a direct client", proxies, "198.51.100.1:5000", nil, "198.51.100.1"},
		{"an untrusted peer's header is ignored", proxies, "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"through a trusted proxy", proxies, "10.0.0.5:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a client's own header left of its proxy's", proxies, "10.0.0.5:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"the same, over two header lines", proxies, "10.0.0.5:5000", []string{"1.2.3.4", "203.0.113.9"}, "203.0.113.9"},
		{"through two trusted proxies", proxies, "10.0.0.5:5000", []string{"1.2.3.4, 203.0.113.9, 192.0.2.7"}, "203.0.113.9"},
		{"a trusted proxy sending none", proxies, "10.0.0.5:5000", nil, "10.0.0.5"},
		{"a hop that is no address stops at the proxy that passed it", proxies, "10.0.0.5:5000", []string{"1.2.3.4, junk"}, "10.0.0.5"},
		{"IPv4-mapped peer", proxies, "[::ffff:10.0.0.5]:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"IPv6 client", proxies, "10.0.0.5:5000", []string{"2001:db8::1"}, "2001:db8::1"},
		{"loopback is the default", Loopback, "127.0.0.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"loopback is not trusted once the list names others", proxies, "127.0.0.1:5000", []string{"203.0.113.9"}, "127.0.0.1"},
		{"none trusts no proxy", none, "127.0.0.1:5000", []string{"203.0.113.9"}, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			var got string
			tt.proxies.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = ClientAddr(r) })).ServeHTTP(httptest.NewRecorder(), r)
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseProxiesRefusesWhatIsNoCIDR(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "10.0.0.1,"} {
		if _, err := ParseProxies(bad); err == nil {
			t.Errorf("ParseProxies(%q): got no error, want one", bad)
		}
	}
}
