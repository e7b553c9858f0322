package front

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
	"kndl.dev/kndl/internal/testenv"
)

// acmeName is the Hub's name in the ACME tests: a DNS name (autocert and
// CAs take no bare word or address), resolved by the test's own DNS
// server to loopback.
const acmeName = "hub.kndl.test"

// pebble is Let's Encrypt's test ACME server, run in this process: its
// directory served over HTTPS, its validation authority checking the
// challenges for real against loopback ports the test gives it.
type pebble struct {
	dir   string         // the ACME directory's URL
	roots *x509.CertPool // what the directory's own certificate is checked against
	issue *x509.CertPool // the root the certificates it issues chain to
	wfe   chan http.Handler
}

// startPebble serves Pebble's directory; validate says where it checks
// the challenges.
func startPebble(t *testing.T) *pebble {
	t.Helper()
	p := &pebble{roots: x509.NewCertPool(), issue: x509.NewCertPool(), wfe: make(chan http.Handler, 1)}
	var wfe http.Handler
	ready := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-ready
		wfe.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	go func() {
		wfe = <-p.wfe
		close(ready)
	}()
	p.dir = srv.URL + pebbleDirectory
	p.roots.AddCert(srv.Certificate())
	return p
}

const pebbleDirectory = wfe.DirectoryPath

// validate starts Pebble's authority and validation, checking http-01 on
// httpPort and tls-alpn-01 on tlsPort of the addresses its DNS server
// gives: 127.0.0.1 for every name.
func (p *pebble) validate(t *testing.T, httpPort, tlsPort int) {
	t.Helper()
	// No random wait before validating, no nonce refused on purpose, no
	// authorization reused: each run does the same.
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")
	logger := log.New(testWriter{t}, "pebble ", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	validator := va.New(logger, httpPort, tlsPort, false, startDNS(t), store)
	p.issue.AddCert(authority.GetRootCert(0).Cert)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	p.wfe <- front.Handler()
}

// startDNS serves DNS over TCP on loopback, as Pebble's validation
// authority asks it: every A query is answered 127.0.0.1, anything else
// with nothing.
func startDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			if qq.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// serveFront opens a Front on loopback ports of its own for s and serves
// a Hub's stand-in on it, answering "hub" to everything.
func serveFront(t *testing.T, s Settings, public *url.URL) *Front {
	t.Helper()
	f, err := Open(s, "127.0.0.1:0", public, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hub") })}
	go srv.Serve(f.Listener())
	f.Start(ctx)
	t.Cleanup(func() {
		cancel()
		srv.Close()
		f.Close()
	})
	return f
}

func portOf(a net.Addr) int { return a.(*net.TCPAddr).Port }

// fetch asks the Hub for / over HTTPS at addr as acmeName, trusting
// roots, and returns the certificate it was served.
func fetch(t *testing.T, addr net.Addr, roots *x509.CertPool, within time.Duration) *x509.Certificate {
	t.Helper()
	c := &http.Client{Timeout: within, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: acmeName},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr.String())
		}}}
	resp, err := c.Get("https://" + acmeName + "/")
	if err != nil {
		t.Fatalf("GET over HTTPS: %v", err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "hub" {
		t.Fatalf("got %q, want the Hub's answer", b)
	}
	return resp.TLS.PeerCertificates[0]
}

// TestAutoGetsACertificateFromACMEAndKeepsIt: with HUB_TLS=auto the Hub
// gets a certificate for its public name from a real ACME server (Pebble,
// in process), answering its challenge on loopback ports (tls-alpn-01 on
// the Hub's own port; http-01 on the redirect port when tls-alpn-01
// can't be reached), serves it, and keeps it in its state folder: a Hub
// started again serves it with the CA gone.
func TestAutoGetsACertificateFromACMEAndKeepsIt(t *testing.T) {
	public, _ := url.Parse("https://" + acmeName)
	tests := []struct {
		name      string
		challenge string
	}{
		{"tls-alpn-01 on the Hub's port", "tls-alpn-01"},
		{"http-01 on the redirect port", "http-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startPebble(t)
			cache := t.TempDir()
			s := Settings{Auto: true, CacheDir: cache, HTTPListen: "127.0.0.1:0", ACMEURL: p.dir, ACMERoots: p.roots}
			if err := s.Check("127.0.0.1:0", public); err != nil {
				t.Fatal(err)
			}
			f := serveFront(t, s, public)
			tlsPort := portOf(f.Listener().Addr())
			if tt.challenge == "http-01" {
				// A port nothing listens on: tls-alpn-01 fails, and the
				// Hub turns to http-01.
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				tlsPort = portOf(ln.Addr())
				ln.Close()
			}
			p.validate(t, portOf(f.RedirectAddr()), tlsPort)
			start := time.Now()
			cert := fetch(t, f.Listener().Addr(), p.issue, testenv.WaitMedium)
			t.Logf("got a certificate from Pebble by %s in %s", tt.challenge, time.Since(start).Round(time.Millisecond))
			if err := cert.VerifyHostname(acmeName); err != nil {
				t.Fatalf("the certificate served: %v", err)
			}

			// Started again with the CA gone, the Hub serves the
			// certificate it keeps.
			f.Close()
			s.ACMEURL = "https://127.0.0.1:1/dir"
			again := serveFront(t, s, public)
			if got := fetch(t, again.Listener().Addr(), p.issue, testenv.WaitShort); !got.Equal(cert) {
				t.Errorf("after a restart: got certificate %s, want the one kept, %s", got.SerialNumber, cert.SerialNumber)
			}
		})
	}
}
