package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

	"kndl.dev/kndl/internal/hub/front"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/testenv"
)

// TestAHubBeyondLoopbackWithoutTLSRefusesToStart: kndl hub told to listen
// beyond loopback with no TLS stops before it touches its store, naming
// both ways out; with HUB_INSECURE_HTTP=1 it starts, saying what that
// exposes; on loopback it starts, saying why plain HTTP is only for there.
func TestAHubBeyondLoopbackWithoutTLSRefusesToStart(t *testing.T) {
	home := t.TempDir()
	// A process of its own, so that a Hub which serves rather than
	// refusing fails the test rather than holding it.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = []string{asKndl + "=hub", "PATH=" + os.Getenv("PATH"), "KNDL_HOME=" + home, "HUB_SECRETS_KEY=" + seal.NewKey(), "HUB_LISTEN=0.0.0.0:0"}
	out, err := cmd.CombinedOutput()
	errOut := string(out)
	if ctx.Err() != nil {
		t.Fatalf("the Hub beyond loopback without TLS started and served instead of refusing:\n%s", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("got exit %d (%v), want 1:\n%s", code, err, out)
	}
	for _, w := range []string{"beyond loopback", "HUB_TLS=auto", "HUB_TLS_CERT and HUB_TLS_KEY", "HUB_INSECURE_HTTP=1", "Runner tokens"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("got %q, want it to name %q", errOut, w)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "hub.db")); !os.IsNotExist(err) {
		t.Errorf("the refused Hub made its store: %v", err)
	}

	tests := []struct {
		name string
		env  map[string]string
		says string
	}{
		{"insecure on purpose", map[string]string{"HUB_LISTEN": "0.0.0.0:0", "HUB_INSECURE_HTTP": "1"}, "HUB_INSECURE_HTTP=1: serving plain HTTP beyond loopback"},
		{"loopback", map[string]string{"HUB_LISTEN": "127.0.0.1:0"}, "serving plain HTTP on loopback alone: sign-in cookies, setup tokens and Runner tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["KNDL_HOME"], tt.env["HUB_SECRETS_KEY"] = t.TempDir(), seal.NewKey()
			p := startKndl(t, tt.env, "hub")
			p.await(t, testenv.WaitMedium, "the Hub says how it serves", regexp.MustCompile(regexp.QuoteMeta(tt.says)))
		})
	}
}

// TestAHubServesHTTPSFromTheOperatorsFiles: kndl hub with HUB_TLS_CERT and
// HUB_TLS_KEY answers over HTTPS with that certificate and HSTS, and its
// plain-HTTP port redirects to HUB_PUBLIC_URL.
func TestAHubServesHTTPSFromTheOperatorsFiles(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "kndl.test"}, DNSNames: []string{"kndl.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(cert)

	p := startKndl(t, map[string]string{"KNDL_HOME": t.TempDir(), "HUB_SECRETS_KEY": seal.NewKey(),
		"HUB_LISTEN": "127.0.0.1:0", "HUB_HTTP_LISTEN": "127.0.0.1:0", "HUB_PUBLIC_URL": "https://kndl.test",
		"HUB_TLS_CERT": filepath.Join(dir, "cert.pem"), "HUB_TLS_KEY": filepath.Join(dir, "key.pem")}, "hub")
	addr := p.await(t, testenv.WaitMedium, "the Hub serves", serving)[1]
	plain := p.await(t, testenv.WaitShort, "the Hub names its redirect port", regexp.MustCompile(`plain HTTP on (\S+) redirects`))[1]

	c := &http.Client{Timeout: testenv.WaitShort, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "kndl.test"},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("https://kndl.test/health")
	if err != nil {
		t.Fatalf("GET /health over HTTPS: %v\n%s", err, p)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") != front.HSTS || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 7 {
		t.Errorf("GET /health over HTTPS: got %d, HSTS %q, certificate %s; want 200, %q, 7", resp.StatusCode,
			resp.Header.Get("Strict-Transport-Security"), resp.TLS.PeerCertificates[0].SerialNumber, front.HSTS)
	}
	direct := &http.Client{Timeout: testenv.WaitShort, CheckRedirect: c.CheckRedirect}
	resp, err = direct.Get("http://" + plain + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://kndl.test/health" {
		t.Errorf("GET /health over plain HTTP: got %d to %q, want 301 to https://kndl.test/health", resp.StatusCode, resp.Header.Get("Location"))
	}
}
