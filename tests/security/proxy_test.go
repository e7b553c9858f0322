package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/hub/front"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/testenv"
)

// proxyName is the name the examples in docs/operating.md serve.
const proxyName = "kndl.example.com"

// docExample returns the fenced block of docs/operating.md in lang.
func docExample(t *testing.T, lang string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("docs/operating.md has no %s example", lang)
	}
	return string(m[1])
}

// proxyCert writes a self-signed certificate for proxyName and its key
// into dir.
func proxyCert(t *testing.T, dir string) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: proxyName}, DNSNames: []string{proxyName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// freeAddr is a TCP address on ip nothing listens on now.
func freeAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runProxy starts a proxy process, stopped when the test ends, and waits
// until it accepts connections at addr.
func runProxy(t *testing.T, addr string, cmd *exec.Cmd) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", cmd.Path, out.String())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, func() string { return cmd.Path + " accepting at " + addr + ":\n" + out.String() })
}

// nginx runs docs/operating.md's nginx example in front of hubAddr,
// listening at addr.
func nginx(t *testing.T, addr, hubAddr, cert, key string) {
	bin := testenv.RequireCommand(t, "nginx")
	dir := t.TempDir()
	site := docExample(t, "nginx")
	for old, new := range map[string]string{
		"listen 443 ssl;": "listen " + addr + " ssl;",
		"/etc/letsencrypt/live/kndl.example.com/fullchain.pem": cert,
		"/etc/letsencrypt/live/kndl.example.com/privkey.pem":   key,
		"127.0.0.1:7380": hubAddr,
	} {
		if !strings.Contains(site, old) {
			t.Fatalf("the nginx example no longer has %q", old)
		}
		site = strings.ReplaceAll(site, old, new)
	}
	conf := "daemon off;\nmaster_process off;\npid " + dir + "/nginx.pid;\nerror_log stderr;\nevents {}\nhttp {\n" +
		"access_log off;\nclient_body_temp_path " + dir + "/body;\nproxy_temp_path " + dir + "/proxy;\n" +
		"fastcgi_temp_path " + dir + "/fcgi;\nuwsgi_temp_path " + dir + "/uwsgi;\nscgi_temp_path " + dir + "/scgi;\n" + site + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	runProxy(t, addr, exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf")))
}

// caddy runs docs/operating.md's Caddy example in front of hubAddr,
// listening at addr, with the test's certificate rather than one from
// Let's Encrypt.
func caddy(t *testing.T, addr, hubAddr, cert, key string) {
	bin := testenv.RequireCommand(t, "caddy")
	dir := t.TempDir()
	site := docExample(t, "caddy")
	ip, port, _ := net.SplitHostPort(addr)
	for old, new := range map[string]string{
		proxyName + " {": proxyName + ":" + port + " {\n\tbind " + ip + "\n\ttls " + cert + " " + key,
		"127.0.0.1:7380": hubAddr,
	} {
		if !strings.Contains(site, old) {
			t.Fatalf("the Caddy example no longer has %q", old)
		}
		site = strings.ReplaceAll(site, old, new)
	}
	conf := "{\n\tadmin off\n\tauto_https disable_redirects\n\tstorage file_system " + dir + "/data\n}\n" + site
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", filepath.Join(dir, "Caddyfile"))
	cmd.Env = []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir + "/data", "XDG_CONFIG_HOME=" + dir + "/config", "PATH=" + os.Getenv("PATH")}
	runProxy(t, addr, cmd)
}

// TestBehindAReverseProxyTheHubRecordsTheClientsAddress: docs/operating.md's
// nginx and Caddy examples, run as written (Debian 12's packages) in front
// of a Hub on loopback, make the Hub record the address the client
// connected to the proxy from (as the CLI login's approval page shows it),
// whatever X-Forwarded-For the client sends; with the proxy's address not
// in HUB_TRUSTED_PROXIES, the Hub records the proxy's own.
func TestBehindAReverseProxyTheHubRecordsTheClientsAddress(t *testing.T) {
	testenv.RequireRoot(t) // nginx runs as root to use the test's paths as they are
	client := nonLoopbackIP(t)
	const spoofed = "198.51.100.66"
	proxies := []struct {
		name string
		run  func(t *testing.T, addr, hubAddr, cert, key string)
	}{
		{"nginx", nginx},
		{"caddy", caddy},
	}
	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			cert, key, roots := proxyCert(t, t.TempDir())
			tests := []struct {
				name    string
				proxies signin.Proxies
				want    string
			}{
				{"proxy trusted (loopback, the default)", signin.Loopback, client},
				{"proxy not trusted", signin.Proxies{}, "127.0.0.1"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					e := newEnv(t, func(c *hub.Config) { c.TrustedProxies = tt.proxies })
					owner := e.owner()
					addr := freeAddr(t, client)
					px.run(t, addr, strings.TrimPrefix(e.url, "http://"), cert, key)

					c := &http.Client{Timeout: testenv.WaitShort, Transport: &http.Transport{
						TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: proxyName},
						DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
							return (&net.Dialer{}).DialContext(ctx, network, addr)
						}}}
					_, hash := auth.NewToken(auth.CLI)
					r, _ := http.NewRequest("POST", "https://"+proxyName+"/api/cli/login",
						strings.NewReader(`{"machine":"laptop","token_sha256":"`+hex.EncodeToString(hash)+`"}`))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("X-Forwarded-For", spoofed)
					resp, err := c.Do(r)
					if err != nil {
						t.Fatalf("a CLI login through %s: %v", px.name, err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var start api.CLILoginCode
					if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &start) != nil {
						t.Fatalf("a CLI login through %s: %d %s", px.name, resp.StatusCode, body)
					}
					page := e.must(owner.Client, req{method: "GET", path: "/cli/login?code=" + start.UserCode}, http.StatusOK)
					got := regexp.MustCompile(`id="login-address">(\S+) `).FindStringSubmatch(page)
					if got == nil || got[1] != tt.want {
						t.Fatalf("the Hub recorded the login as from %v, want %s (the client %s sent X-Forwarded-For: %s)", got, tt.want, client, spoofed)
					}
				})
			}
		})
	}
}

// TestAHubWhoseURLIsHTTPSSetsHSTS: every answer of a Hub whose
// HUB_PUBLIC_URL is https carries Strict-Transport-Security, whether it
// serves TLS itself or a proxy in front does; over plain http on loopback,
// none.
func TestAHubWhoseURLIsHTTPSSetsHSTS(t *testing.T) {
	tests := []struct {
		name, public, want string
	}{
		{"https", "https://" + proxyName, front.HSTS},
		{"http on loopback", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *hub.Config) {
				if tt.public != "" {
					c.PublicURL = tt.public
				}
			})
			for _, path := range []string{"/health", "/signin", "/api/sessions"} {
				resp := e.send(nil, req{method: "GET", path: path})
				resp.Body.Close()
				if got := resp.Header.Get("Strict-Transport-Security"); got != tt.want {
					t.Errorf("GET %s: got Strict-Transport-Security %q, want %q", path, got, tt.want)
				}
			}
		})
	}
}
