package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	"kndl.dev/kndl/internal/errdefs"
)

func TestAWildcardMatchesNamesUnderItsDomainNotTheDomainItself(t *testing.T) {
	m := Policy{Mode: ModeAllowlist, Allow: []string{"*.example.com", "api.other.org"}}.Matcher()
	tests := []struct {
		host string
		want bool
	}{
		{"a.example.com", true},
		{"a.b.example.com", true},
		{"A.Example.COM.", true},
		{"example.com", false},
		{"badexample.com", false},
		{"example.com.evil.net", false},
		{"api.other.org", true},
		{"www.api.other.org", false},
		{"other.org", false},
		{"github.com", false},
	}
	for _, tt := range tests {
		if got := m.Allows(tt.host); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

// TestAnAllowlistHasTheGitHubPresetOnlyIfItNamesIt: git and gh go
// through the Runner's git relay, so an allowlist naming nothing (or the
// old "-github") lets no GitHub host through, where code in the Sandbox
// could send anything with a token of its own.
func TestAnAllowlistHasTheGitHubPresetOnlyIfItNamesIt(t *testing.T) {
	hosts := []string{"github.com", "api.github.com", "gist.github.com", "codeload.github.com", "objects.githubusercontent.com"}
	for _, allow := range [][]string{nil, {"-github"}, {"npm", "*.example.com"}} {
		m := Policy{Mode: ModeAllowlist, Allow: allow}.Matcher()
		for _, h := range hosts {
			if m.Allows(h) {
				t.Errorf("allowlist %v: got %s allowed, want it refused", allow, h)
			}
		}
	}
	on := Policy{Mode: ModeAllowlist, Allow: []string{"github"}}.Matcher()
	for _, h := range hosts {
		if !on.Allows(h) {
			t.Errorf("allowlist [github]: got %s refused, want it allowed", h)
		}
	}
	if open := (Policy{}).Matcher(); open.Allows("github.com") {
		t.Errorf("an open Policy's Matcher allows github.com; it should allow nothing, open Sandboxes bypass the proxy")
	}
}

// TestTheModelAPIIsOnNoAllowlistUnlessListed: Claude Code's model calls
// go through the relay in both HUB_CLAUDE_TOKEN modes, so no allowlist,
// with or without the default preset, with every preset or a wildcard of
// its own, lets a Sandbox reach api.anthropic.com, where its code could
// upload the Workspace to any account with a key of its own. Only a list
// that names it does.
func TestTheModelAPIIsOnNoAllowlistUnlessListed(t *testing.T) {
	all := slices.Sorted(maps.Keys(Presets))
	for _, allow := range [][]string{nil, {"-github"}, all, {"*.example.com", "-github"}} {
		p := Policy{Mode: ModeAllowlist, Allow: allow}
		for _, host := range []string{"api.anthropic.com", "anthropic.com", "API.Anthropic.com."} {
			if p.Matcher().Allows(host) {
				t.Errorf("allowlist %v: got %s allowed, want it refused (hosts %v)", allow, host, p.Hosts())
			}
		}
	}
	if !(Policy{Mode: ModeAllowlist, Allow: []string{"api.anthropic.com"}}).Matcher().Allows("api.anthropic.com") {
		t.Error("an allowlist naming api.anthropic.com refuses it, want it allowed as listed")
	}
}

func TestEachPresetExpandsToItsRegistries(t *testing.T) {
	tests := []struct{ preset, host string }{
		{"debian", "deb.debian.org"},
		{"npm", "registry.npmjs.org"},
		{"pypi", "files.pythonhosted.org"},
		{"go", "proxy.golang.org"},
		{"github", "github.com"},
		{"crates", "static.crates.io"},
		{"docker", "registry-1.docker.io"},
	}
	for _, tt := range tests {
		p := Policy{Mode: ModeAllowlist, Allow: []string{tt.preset}}
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", tt.preset, err)
		}
		if !p.Matcher().Allows(tt.host) {
			t.Errorf("preset %s: %s refused; its hosts are %v", tt.preset, tt.host, p.Hosts())
		}
		if tt.preset != "debian" && p.Matcher().Allows("deb.debian.org") {
			t.Errorf("preset %s allows deb.debian.org", tt.preset)
		}
	}
}

// TestTheDockerPresetHasWhatAPullFromDockerHubReaches: the registry, its
// token service, and the CDN and bucket hosts its blob requests redirect
// to, as Docker's allowlist documentation names them; not Docker Hub's
// web site, nor any other bucket on the same storage service.
func TestTheDockerPresetHasWhatAPullFromDockerHubReaches(t *testing.T) {
	m := Policy{Mode: ModeAllowlist, Allow: []string{"docker"}}.Matcher()
	for _, host := range []string{"registry-1.docker.io", "auth.docker.io", "index.docker.io", "production.cloudflare.docker.com",
		"production.cloudfront.docker.com", "docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com"} {
		if !m.Allows(host) {
			t.Errorf("the docker preset refuses %s", host)
		}
	}
	for _, host := range []string{"docker.io", "hub.docker.com", "attacker.r2.cloudflarestorage.com", "r2.cloudflarestorage.com", "github.com"} {
		if m.Allows(host) {
			t.Errorf("the docker preset allows %s", host)
		}
	}
}

func TestAPolicyRefusesWhatItCannotEnforce(t *testing.T) {
	tests := []struct {
		p    Policy
		want string
	}{
		{Policy{Mode: "closed"}, "want open or allowlist"},
		{Policy{Allow: []string{"a.example.com"}}, "while egress is open"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"localhost"}}, "neither a host name"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.1"}}, "is not a host name"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"Example.com"}}, "is not a host name"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"*.*.example.com"}}, "wildcard domain"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"example.com:8080"}}, "is not a host name"},
		{Policy{Mode: ModeAllowlist, Allow: []string{"-npm"}}, "none is on unless listed"},
	}
	for _, tt := range tests {
		err := tt.p.Check()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Check(%+v) = %v, want an ErrInvalid saying %q", tt.p, err, tt.want)
		}
	}
	for _, ok := range []Policy{{}, {Mode: ModeOpen}, {Mode: ModeAllowlist, Allow: []string{"npm", "*.example.com", "x-1.example.com", "-github"}}} {
		if err := ok.Check(); err != nil {
			t.Errorf("Check(%+v) = %v", ok, err)
		}
	}
}

// TestCheckHostTakesOneExactHostName: what the Session view's Allow adds
// is a name an allowlist matches exactly, never a wildcard, a preset or
// an address that would open more.
func TestCheckHostTakesOneExactHostName(t *testing.T) {
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"registry.example.com", true},
		{"x-1.example.com", true},
		{"*.example.com", false},
		{"npm", false},
		{"localhost", false},
		{"10.0.0.1", false},
		{"Example.com", false},
		{"example.com:443", false},
		{"example.com.", false},
		{"", false},
		{strings.Repeat("a.", 127) + "com", false},
	} {
		err := CheckHost(tt.host)
		if got := err == nil; got != tt.ok || (err != nil && !errors.Is(err, errdefs.ErrInvalid)) {
			t.Errorf("CheckHost(%q) = %v, want ok %v (else ErrInvalid)", tt.host, err, tt.ok)
		}
	}
}

// clientHello is what a real TLS client sends first for serverName.
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake()
	}()
	got := make(chan []byte)
	go func() {
		host, read, err := Sniff(b)
		if err != nil || host != serverName {
			t.Errorf("Sniff = %q, %v; want %q", host, err, serverName)
		}
		got <- read
	}()
	r := <-got
	a.Close()
	b.Close()
	return r
}

func TestSniffReadsTheServerNameOfATLSClientHelloAndKeepsItsBytes(t *testing.T) {
	read := clientHello(t, "registry.npmjs.org")
	if len(read) < 5 || read[0] != 0x16 || !bytes.Contains(read, []byte("registry.npmjs.org")) {
		t.Fatalf("Sniff kept %d bytes %x, want the ClientHello record", len(read), read[:min(len(read), 16)])
	}
}

func TestSniffReadsTheHostOfAnHTTPRequest(t *testing.T) {
	req := "GET /simple/ HTTP/1.1\r\nHost: pypi.org:80\r\nUser-Agent: pip\r\n\r\n"
	host, read, err := Sniff(strings.NewReader(req))
	if err != nil || host != "pypi.org" || string(read) != req {
		t.Fatalf("Sniff = %q, %q, %v; want pypi.org and the request as sent", host, read, err)
	}
}

func TestSniffRefusesAConnectionThatNamesNoHost(t *testing.T) {
	for name, in := range map[string]string{
		"raw bytes":        "SSH-2.0-OpenSSH_9.2\r\n",
		"HTTP/1.0 no Host": "GET / HTTP/1.0\r\n\r\n",
	} {
		if host, _, err := Sniff(strings.NewReader(in)); err == nil {
			t.Errorf("%s: Sniff = %q, want an error", name, host)
		}
	}
	a, b := net.Pipe()
	go tls.Client(a, &tls.Config{InsecureSkipVerify: true}).Handshake() // no ServerName: no SNI
	_, _, err := Sniff(b)
	a.Close()
	if err == nil || !strings.Contains(err.Error(), "no SNI") {
		t.Errorf("a ClientHello without SNI: %v, want no SNI", err)
	}
}

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTheDNSServerAnswersAllowedNamesAndRefusesTheRestWithoutAskingAnyone(t *testing.T) {
	sandbox := netip.MustParseAddr("10.174.0.6")
	var asked, blocked []string
	d := &DNS{
		Policy: func(src netip.Addr) (Matcher, bool) {
			return Policy{Mode: ModeAllowlist, Allow: []string{"*.example.com"}}.Matcher(), src == sandbox
		},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			asked = append(asked, host)
			return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
		},
		Blocked: func(_ netip.Addr, name string) { blocked = append(blocked, name) },
	}
	parse := func(b []byte) dnsmessage.Message {
		var m dnsmessage.Message
		if err := m.Unpack(b); err != nil {
			t.Fatalf("unpack the answer: %v", err)
		}
		return m
	}
	ok := parse(d.answer(context.Background(), sandbox, query(t, "a.example.com.", dnsmessage.TypeA)))
	if ok.RCode != dnsmessage.RCodeSuccess || len(ok.Answers) != 1 || ok.Answers[0].Body.(*dnsmessage.AResource).A != [4]byte{203, 0, 113, 9} || ok.ID != 7 {
		t.Errorf("a.example.com: %+v, want 203.0.113.9", ok)
	}
	v6 := parse(d.answer(context.Background(), sandbox, query(t, "a.example.com.", dnsmessage.TypeAAAA)))
	if v6.RCode != dnsmessage.RCodeSuccess || len(v6.Answers) != 0 {
		t.Errorf("AAAA of a.example.com: %+v, want no answer", v6)
	}
	no := parse(d.answer(context.Background(), sandbox, query(t, "secret-data.evil.net.", dnsmessage.TypeA)))
	if no.RCode != dnsmessage.RCodeNameError {
		t.Errorf("evil.net: %v, want NXDOMAIN", no.RCode)
	}
	if !slices.Equal(asked, []string{"a.example.com"}) || !slices.Equal(blocked, []string{"secret-data.evil.net"}) {
		t.Errorf("asked %v, blocked %v; want only a.example.com asked and the evil name blocked", asked, blocked)
	}
	if out := d.answer(context.Background(), netip.MustParseAddr("10.174.0.10"), query(t, "a.example.com.", dnsmessage.TypeA)); out != nil {
		t.Errorf("a source that is no restricted Sandbox's got an answer")
	}
}

func TestSniffLeavesAnHTTPRequestWhole(t *testing.T) {
	// What the proxy sends on is the request as a server reads it.
	_, read, err := Sniff(strings.NewReader("POST /x HTTP/1.1\r\nHost: a.example.com\r\nContent-Length: 2\r\n\r\nhi"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.ReadRequest(bufioReader(read))
	if err != nil || req.Host != "a.example.com" || req.ContentLength != 2 {
		t.Fatalf("the bytes sent on read as %+v, %v", req, err)
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
