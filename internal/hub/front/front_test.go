package front

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// TestPlainHTTPIsServedOnLoopbackAlone: without TLS a Hub on an address
// beyond loopback refuses to start, naming both ways out, unless
// HUB_INSECURE_HTTP=1; on loopback it starts, saying why only there.
func TestPlainHTTPIsServedOnLoopbackAlone(t *testing.T) {
	plain, _ := url.Parse("http://kndl.example.com")
	secure, _ := url.Parse("https://kndl.example.com")
	tests := []struct {
		name   string
		s      Settings
		listen string
		public *url.URL
		err    []string // what the error names; none: it starts
	}{
		{"loopback", Settings{}, "127.0.0.1:7380", plain, nil},
		{"loopback by name", Settings{}, "localhost:7380", plain, nil},
		{"IPv6 loopback", Settings{}, "[::1]:7380", plain, nil},
		{"every address", Settings{}, ":7380", plain, []string{"beyond loopback", "HUB_TLS=auto", "HUB_TLS_CERT", "HUB_INSECURE_HTTP=1"}},
		{"0.0.0.0", Settings{}, "0.0.0.0:7380", plain, []string{"beyond loopback", "HUB_TLS=auto", "HUB_INSECURE_HTTP=1"}},
		{"an address beyond loopback", Settings{}, "192.0.2.10:7380", plain, []string{"beyond loopback"}},
		{"beyond loopback, insecure on purpose", Settings{InsecureHTTP: true}, "0.0.0.0:7380", plain, nil},
		{"beyond loopback with TLS", Settings{Auto: true}, "0.0.0.0:443", secure, nil},
		{"TLS with an http URL", Settings{Auto: true}, "0.0.0.0:443", plain, []string{"HUB_PUBLIC_URL", "https://"}},
		{"auto for an address", Settings{Auto: true}, "0.0.0.0:443", must(url.Parse("https://192.0.2.10")), []string{"DNS name"}},
		{"a certificate without its key", Settings{CertFile: "c.pem"}, "0.0.0.0:443", secure, []string{"HUB_TLS_KEY"}},
		{"two sources", Settings{Auto: true, CertFile: "c.pem", KeyFile: "k.pem"}, "0.0.0.0:443", secure, []string{"keep one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Check(tt.listen, tt.public)
			if len(tt.err) == 0 {
				if err != nil {
					t.Fatalf("got %v, want it to start", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one naming %q", tt.err)
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to name %q", err, w)
				}
			}
		})
	}
	s := Settings{}
	f, err := Open(s, "127.0.0.1:0", plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := f.Notice(); !strings.Contains(n, "loopback") || !strings.Contains(n, "cookies, setup tokens and Runner tokens") {
		t.Errorf("at start, got %q, want it to say plain HTTP is for loopback and why", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// writePair writes a new self-signed certificate for acmeName and its key
// into dir, as a renewal does (new files moved into place), and returns
// the certificate.
func writePair(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: acmeName}, DNSNames: []string{acmeName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	put := func(name, typ string, b []byte) {
		tmp := filepath.Join(dir, name+".new")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	put("cert.pem", "CERTIFICATE", der)
	put("key.pem", "EC PRIVATE KEY", kb)
	c, _ := x509.ParseCertificate(der)
	return c
}

// TestTheOperatorsFilesAreServedAndReadAgainWhenTheyChange: with
// HUB_TLS_CERT and HUB_TLS_KEY the Hub serves that certificate; renewed on
// disk, the next connection gets the new one with no restart; files that
// don't load (a certificate renewed before its key) leave the one before
// serving.
func TestTheOperatorsFilesAreServedAndReadAgainWhenTheyChange(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, 1)
	public, _ := url.Parse("https://" + acmeName)
	s := Settings{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), HTTPListen: "none"}
	if err := s.Check("127.0.0.1:0", public); err != nil {
		t.Fatal(err)
	}
	f := serveFront(t, s, public)
	roots := x509.NewCertPool()
	roots.AddCert(first)
	if got := fetch(t, f.Listener().Addr(), roots, testenv.WaitShort); got.SerialNumber.Int64() != 1 {
		t.Fatalf("got certificate %s, want 1", got.SerialNumber)
	}

	second := writePair(t, dir, 2)
	roots.AddCert(second)
	if got := fetch(t, f.Listener().Addr(), roots, testenv.WaitShort); got.SerialNumber.Int64() != 2 {
		t.Fatalf("after the files were renewed: got certificate %s, want 2", got.SerialNumber)
	}

	// A key that is not the certificate's.
	other := t.TempDir()
	writePair(t, other, 3)
	if err := os.Rename(filepath.Join(other, "key.pem"), filepath.Join(dir, "key.pem")); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, f.Listener().Addr(), roots, testenv.WaitShort); got.SerialNumber.Int64() != 2 {
		t.Fatalf("with a key that doesn't match: got certificate %s, want 2 still", got.SerialNumber)
	}

	// Files that don't load at start stop the start.
	if _, err := Open(Settings{CertFile: s.CertFile, KeyFile: s.KeyFile}, "127.0.0.1:0", public, nil); err == nil || !strings.Contains(err.Error(), "HUB_TLS_CERT") {
		t.Errorf("a pair that doesn't load at start: got %v, want an error naming HUB_TLS_CERT", err)
	}
}

// TestPlainHTTPRedirectsToTheHubOverHTTPS: the plain-HTTP port sends every
// request to the same path on HUB_PUBLIC_URL's host over HTTPS, never to
// a host the request names; GET and HEAD by 301, the rest by 308, which
// keeps the method.
func TestPlainHTTPRedirectsToTheHubOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, 1)
	public, _ := url.Parse("https://" + acmeName + ":8443")
	s := Settings{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), HTTPListen: "127.0.0.1:0"}
	if err := s.Check("127.0.0.1:0", public); err != nil {
		t.Fatal(err)
	}
	f := serveFront(t, s, public)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		method, path, host string
		code               int
	}{
		{"GET", "/sessions/s1?tab=changes", "", http.StatusMovedPermanently},
		{"HEAD", "/", "", http.StatusMovedPermanently},
		{"POST", "/api/cli/login", "", http.StatusPermanentRedirect},
		{"GET", "/signin", "evil.example.net", http.StatusMovedPermanently},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(tt.method, "http://"+f.RedirectAddr().String()+tt.path, nil)
		if tt.host != "" {
			r.Host = tt.host
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := "https://" + acmeName + ":8443" + tt.path; resp.StatusCode != tt.code || resp.Header.Get("Location") != want {
			t.Errorf("%s %s (Host %q): got %d to %q, want %d to %q", tt.method, tt.path, tt.host, resp.StatusCode, resp.Header.Get("Location"), tt.code, want)
		}
	}
}
