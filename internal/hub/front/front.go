// Package front is how the Hub meets the network: HTTPS with a certificate
// from ACME (HUB_TLS=auto) or from files the operator keeps (HUB_TLS_CERT,
// HUB_TLS_KEY), the plain-HTTP port that sends browsers to HTTPS, HSTS,
// and the rule that plain HTTP is served only on loopback. internal/hub
// reads its Settings and sets HSTS; internal/daemon opens it.
package front

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Settings say how the Hub serves: each field names its environment
// variable and default; FromEnv reads them, Check fills in and checks.
type Settings struct {
	// Auto gets and renews the certificate for HUB_PUBLIC_URL's host with
	// ACME, answering the CA's tls-alpn-01 challenge on Listen and its
	// http-01 on HTTPListen. HUB_TLS=auto; default off.
	Auto bool
	// CertFile and KeyFile are a certificate chain and its key, PEM, that
	// the operator keeps (certbot, a company CA). They are read again at
	// the first handshake after either changes on disk, so a renewal needs
	// no restart. HUB_TLS_CERT, HUB_TLS_KEY; default none.
	CertFile, KeyFile string
	// ACMEURL is the ACME CA's directory. HUB_ACME_URL, default Let's
	// Encrypt's (autocert.DefaultACMEDirectory).
	ACMEURL string
	// ACMEEmail is the contact the CA writes to about the certificate.
	// HUB_ACME_EMAIL, default none.
	ACMEEmail string
	// CacheDir keeps the ACME account key and certificates, so a restart
	// asks the CA for nothing: $KNDL_HOME/acme.
	CacheDir string
	// HTTPListen is the plain-HTTP address that redirects to HTTPS (and
	// answers ACME's http-01 challenge) while the Hub serves TLS.
	// HUB_HTTP_LISTEN, default Listen's host on port 80; none turns it off.
	HTTPListen string
	// InsecureHTTP lets the Hub serve plain HTTP beyond loopback, for a
	// network the operator trusts. HUB_INSECURE_HTTP=1; default off.
	InsecureHTTP bool
	// ACMERoots are the CAs the ACME directory's own certificate is
	// checked against; nil is the system's (SSL_CERT_FILE adds one). Tests
	// set it for their local ACME server.
	ACMERoots *x509.CertPool
}

// FromEnv reads the Settings; home is $KNDL_HOME.
func FromEnv(getenv func(string) string, home string) (Settings, error) {
	s := Settings{CertFile: getenv("HUB_TLS_CERT"), KeyFile: getenv("HUB_TLS_KEY"), ACMEURL: getenv("HUB_ACME_URL"),
		ACMEEmail: getenv("HUB_ACME_EMAIL"), HTTPListen: getenv("HUB_HTTP_LISTEN"), CacheDir: filepath.Join(home, "acme")}
	var errs []error
	switch v := getenv("HUB_TLS"); v {
	case "":
	case "auto":
		s.Auto = true
	default:
		errs = append(errs, fmt.Errorf("HUB_TLS %q: want auto (a certificate from ACME), or leave it unset and set HUB_TLS_CERT and HUB_TLS_KEY", v))
	}
	switch v := getenv("HUB_INSECURE_HTTP"); v {
	case "", "0":
	case "1":
		s.InsecureHTTP = true
	default:
		errs = append(errs, fmt.Errorf("HUB_INSECURE_HTTP %q: want 1 or unset", v))
	}
	return s, errors.Join(errs...)
}

// TLS reports whether the Hub serves HTTPS itself.
func (s Settings) TLS() bool { return s.Auto || s.CertFile != "" }

// Check fills in the defaults that depend on the Hub's address and public
// URL, and checks the Settings: the certificate's source is one, the
// public URL is https with TLS on, and plain HTTP stays on loopback unless
// InsecureHTTP says otherwise.
func (s *Settings) Check(listen string, public *url.URL) error {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errors.New("set both HUB_TLS_CERT and HUB_TLS_KEY (the certificate chain and its key, PEM), or neither")
	}
	if s.Auto && s.CertFile != "" {
		return errors.New("HUB_TLS=auto and HUB_TLS_CERT both name where the certificate comes from: keep one")
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("HUB_LISTEN %q: want host:port such as 127.0.0.1:7380", listen)
	}
	if !s.TLS() {
		if !loopback(host) && !s.InsecureHTTP {
			return fmt.Errorf("HUB_LISTEN %s is beyond loopback and the Hub has no TLS: sign-in cookies, setup tokens and Runner tokens would cross the network readable. "+
				"Set HUB_TLS=auto (a certificate from Let's Encrypt for HUB_PUBLIC_URL's host) or HUB_TLS_CERT and HUB_TLS_KEY; "+
				"or, behind a TLS reverse proxy on a network you trust, HUB_INSECURE_HTTP=1 (a proxy on this machine needs neither: HUB_LISTEN=127.0.0.1:7380)", listen)
		}
		return nil
	}
	if public.Scheme != "https" {
		return fmt.Errorf("HUB_PUBLIC_URL %q: the Hub serves TLS, so its URL is https://", public)
	}
	if s.Auto && (net.ParseIP(public.Hostname()) != nil || !strings.Contains(public.Hostname(), ".")) {
		return fmt.Errorf("HUB_TLS=auto gets a certificate for HUB_PUBLIC_URL's host, which must be a DNS name such as kndl.example.com whose DNS points at this machine, not %q", public.Hostname())
	}
	if s.ACMEURL == "" {
		s.ACMEURL = autocert.DefaultACMEDirectory
	}
	switch s.HTTPListen {
	case "":
		s.HTTPListen = net.JoinHostPort(host, "80")
	case "none":
		s.HTTPListen = ""
	default:
		if _, _, err := net.SplitHostPort(s.HTTPListen); err != nil {
			return fmt.Errorf("HUB_HTTP_LISTEN %q: want host:port such as :80, or none", s.HTTPListen)
		}
	}
	return nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HSTS is how long a browser that saw the Hub over HTTPS goes there by
// HTTPS alone. It names no subdomains: the Hub's domain may have others
// that are not its own.
const HSTS = "max-age=63072000"

// WithHSTS sets Strict-Transport-Security on every answer of next: for a
// Hub whose public URL is https, whether it serves TLS itself or a proxy
// in front does (browsers heed it only over HTTPS).
func WithHSTS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", HSTS)
		next.ServeHTTP(w, r)
	})
}

// Front is the Hub's listeners: its own address, with TLS if the Settings
// have it, and the plain-HTTP port that redirects to HTTPS.
type Front struct {
	ln       net.Listener
	redirect *http.Server // nil without TLS or with HUB_HTTP_LISTEN=none
	rln      net.Listener
	done     chan struct{} // closed once the redirect port's server returned
	started  bool
	notice   string
}

// Open binds listen, and with TLS the redirect port, checking that the
// certificate files load. public is HUB_PUBLIC_URL; s has been checked.
func Open(s Settings, listen string, public *url.URL, log *slog.Logger) (_ *Front, err error) {
	raw, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (set HUB_LISTEN to another address)", listen, err)
	}
	f := &Front{ln: raw, done: make(chan struct{})}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if !s.TLS() {
		f.notice = "serving plain HTTP on loopback alone: sign-in cookies, setup tokens and Runner tokens cross this connection readable, so only this machine (or a TLS reverse proxy on it) may reach it; HUB_TLS=auto or HUB_TLS_CERT and HUB_TLS_KEY serve HTTPS"
		if !loopback(hostOf(listen)) {
			f.notice = "HUB_INSECURE_HTTP=1: serving plain HTTP beyond loopback, where sign-in cookies, setup tokens and Runner tokens cross the network readable by anyone on the path"
		}
		return f, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12,
		// HTTP/1.1 alone: browsers' WebSockets (the Session view, the
		// terminal) need it, and the Hub hijacks them.
		NextProtos: []string{"http/1.1"}}
	redirect := redirectTo(public)
	if s.Auto {
		m := &autocert.Manager{Prompt: autocert.AcceptTOS, Cache: autocert.DirCache(s.CacheDir), Email: s.ACMEEmail,
			HostPolicy: hostPolicy(public.Hostname()),
			Client:     &acme.Client{DirectoryURL: s.ACMEURL, HTTPClient: acmeHTTP(s.ACMERoots)}}
		cfg.GetCertificate = m.GetCertificate
		cfg.NextProtos = append(cfg.NextProtos, acme.ALPNProto)
		redirect = m.HTTPHandler(redirect)
		f.notice = fmt.Sprintf("serving HTTPS with a certificate for %s from %s, kept and renewed in %s", public.Hostname(), s.ACMEURL, s.CacheDir)
	} else {
		kp := &keyPair{cert: s.CertFile, key: s.KeyFile, log: log}
		if _, err := kp.get(nil); err != nil {
			return nil, err
		}
		cfg.GetCertificate = kp.get
		f.notice = fmt.Sprintf("serving HTTPS with %s, read again when it changes", s.CertFile)
	}
	f.ln = tls.NewListener(raw, cfg)
	if s.HTTPListen == "" {
		return f, nil
	}
	if f.rln, err = net.Listen("tcp", s.HTTPListen); err != nil {
		return nil, fmt.Errorf("listen on %s for the redirect to HTTPS: %w (set HUB_HTTP_LISTEN to another address, or none)", s.HTTPListen, err)
	}
	f.redirect = &http.Server{Handler: redirect, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	f.notice += fmt.Sprintf("; plain HTTP on %s redirects to it", f.rln.Addr())
	return f, nil
}

// hostPolicy allows the certificate for host alone. An http-01 request's
// Host may carry the port the CA asked on (autocert checks it whole), which
// names the same host.
func hostPolicy(host string) autocert.HostPolicy {
	allow := autocert.HostWhitelist(host)
	return func(ctx context.Context, h string) error {
		if name, _, err := net.SplitHostPort(h); err == nil {
			h = name
		}
		return allow(ctx, h)
	}
}

// acmeHTTP is the client the ACME exchange uses: the system's CAs, or roots.
func acmeHTTP(roots *x509.CertPool) *http.Client {
	if roots == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots}
	return &http.Client{Transport: t}
}

// redirectTo sends each request to the same path on public: its host, not
// the one the request names, so the redirect goes nowhere else.
func redirectTo(public *url.URL) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusPermanentRedirect // keeps the method and body
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			code = http.StatusMovedPermanently
		}
		http.Redirect(w, r, "https://"+public.Host+r.URL.RequestURI(), code)
	})
}

func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}

// Listener is what the Hub serves on: with TLS, connections arrive
// decrypted.
func (f *Front) Listener() net.Listener { return f.ln }

// Notice says how the Hub serves and, for plain HTTP, why that is only
// for loopback; the Hub prints it at start.
func (f *Front) Notice() string { return f.notice }

// RedirectAddr is the plain-HTTP port's address, or nil.
func (f *Front) RedirectAddr() net.Addr {
	if f.rln == nil {
		return nil
	}
	return f.rln.Addr()
}

// Start serves the redirect port until ctx ends or Close.
func (f *Front) Start(ctx context.Context) {
	if f.redirect == nil {
		return
	}
	f.redirect.BaseContext = func(net.Listener) context.Context { return ctx }
	f.started = true
	go func() {
		defer close(f.done)
		f.redirect.Serve(f.rln)
	}()
	context.AfterFunc(ctx, func() { f.redirect.Close() })
}

// Close stops the redirect port and closes the listeners, and waits for
// the redirect port's server to return.
func (f *Front) Close() {
	if f.redirect != nil {
		f.redirect.Close()
	}
	if f.rln != nil {
		f.rln.Close()
	}
	f.ln.Close()
	if f.started {
		<-f.done
	}
}
