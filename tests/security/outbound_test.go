package security

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/testkit"
)

// onlyLoopback fails t for any connection beyond 127.0.0.1.
func onlyLoopback(t *testing.T, d *testkit.Dials) {
	for _, a := range d.All() {
		if ap, err := netip.ParseAddrPort(a); err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("connected to %s", a)
		}
	}
}

// inEachRefusedRange is one address in each range of the table, each cloud
// metadata address, and an IPv4-mapped one. 127.0.0.1 is allowed in these
// tests, so loopback's is 127.0.0.2.
func inEachRefusedRange() []netip.Addr {
	var out []netip.Addr
	for _, p := range append(slices.Clone(outbound.RefusedV4), outbound.RefusedV6...) {
		a := p.Addr()
		if p.Bits() < a.BitLen() {
			a = a.Next().Next()
		}
		out = append(out, a)
	}
	for _, s := range []string{"169.254.169.254", "100.100.100.200", "fd00:ec2::254", "::ffff:169.254.169.254"} {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestTheHubAndRunnersOwnRequestsReachNoRefusedRange is the outbound
// dialer's conformance test. A name the test's resolver maps into each
// refused range is refused, before anything is sent, from the Hub's
// Gateway, its OAuth discovery and a Runner's image pull (localhost, the
// name each uses, resolving there), and so is a registry's redirect to one;
// with the name mapped to the allowed loopback
// address (HUB_OUTBOUND_ALLOW and RUNNER_OUTBOUND_ALLOW of 127.0.0.1) each
// reaches its server. Nothing is connected to but 127.0.0.1.
func TestTheHubAndRunnersOwnRequestsReachNoRefusedRange(t *testing.T) {
	var dns testkit.Resolver
	var conns testkit.Dials
	allow, err := outbound.ParseAllow("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	e := newGatewayEnv(t, func(c *hub.Config) {
		c.Outbound = outbound.Dialer{Allow: allow, Setting: "HUB_OUTBOUND_ALLOW", Resolver: &dns, Connect: conns.Connect}
	})

	// The Gateway: an Installation of the test's MCP server named by a
	// name the test resolves.
	mcp, _ := url.Parse(e.up.URL)
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:far", Name: "Far", URL: "http://localhost:" + mcp.Port() + mcp.Path, Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "far", Server: "hub:far", Name: "Far", Repos: []string{e.repo.ID}}, nil)
	e.api(e.bob, "PUT", "/api/mcp/installations/far/secrets/api-key", map[string]string{"value": mcpKey}, nil)
	_, start, _ := e.started()
	// OAuth discovery: an OAuth MCP server named likewise.
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	resource, _ := url.Parse(as.MCP.URL)
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:lin", Name: "Lin", URL: "http://localhost:" + resource.Port() + resource.Path, Auth: "oauth"}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "lin", Server: "hub:lin", Name: "Lin", Repos: []string{e.repo.ID}}, nil)
	// A Runner's pull, with the dialer RUNNER_OUTBOUND_ALLOW makes, from a
	// registry on loopback and from one that redirects its blobs.
	rcfg, err := runner.FromEnv(envVars{"KNDL_HUB_URL": e.url, "RUNNER_TOKEN": "x", "RUNNER_OUTBOUND_ALLOW": "127.0.0.1"}.get, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rcfg.Outbound.Resolver, rcfg.Outbound.Connect = &dns, conns.Connect
	reg, redirecting := testRegistries(t)
	pull := func(ref string) error {
		_, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: rcfg.Outbound.Transport()})
		return err
	}

	for _, a := range inEachRefusedRange() {
		dns.Set("localhost", a.String())
		dns.Set("blobs.test", "127.0.0.1")
		code, body := e.do(nil, req{method: "POST", path: "/gateway/far", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, bearer: start.ModToken, from: nextAddr()})
		if code != http.StatusBadGateway || !strings.Contains(body, "HUB_OUTBOUND_ALLOW") {
			t.Errorf("the Gateway to %s: got %d %s, want 502 naming HUB_OUTBOUND_ALLOW", a, code, body)
		}
		code, body = e.do(e.bob.Client, req{method: "POST", path: "/api/mcp/installations/lin/connect", origin: "self"})
		if code == http.StatusOK || !strings.Contains(body, "HUB_OUTBOUND_ALLOW") {
			t.Errorf("OAuth discovery at %s: got %d %s, want it refused naming HUB_OUTBOUND_ALLOW", a, code, body)
		}
		if err := pull("localhost:" + reg + "/img:v1"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "RUNNER_OUTBOUND_ALLOW") {
			t.Errorf("a pull from %s: got %v, want refused naming RUNNER_OUTBOUND_ALLOW", a, err)
		}
		dns.Set("localhost", "127.0.0.1")
		dns.Set("blobs.test", a.String())
		if err := pull("localhost:" + redirecting + "/img:v1"); !errors.Is(err, errdefs.ErrForbidden) {
			t.Errorf("a pull redirected to %s: got %v, want refused", a, err)
		}
	}

	dns.Set("localhost", "127.0.0.1")
	dns.Set("blobs.test", "127.0.0.1")
	if got := e.echoThrough("far", start.ModToken, "near"); got != "echo: near" {
		t.Errorf("the Gateway on the allowed address answered %q", got)
	}
	var begun struct {
		URL string `json:"url"`
	}
	// The server names itself by its address, which discovery checks.
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:near", Name: "Near", URL: as.MCP.URL, Auth: "oauth"}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "near", Server: "hub:near", Name: "Near", Repos: []string{e.repo.ID}}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations/near/connect", nil, &begun)
	if !strings.HasPrefix(begun.URL, as.URL) {
		t.Errorf("OAuth discovery on the allowed address began at %q, want %s", begun.URL, as.URL)
	}
	for _, r := range []string{reg, redirecting} {
		if err := pull("localhost:" + r + "/img:v1"); err != nil {
			t.Errorf("a pull from the allowed address: %v", err)
		}
	}
	onlyLoopback(t, &conns)
}

// testRegistries starts an in-process registry with img:v1 on 127.0.0.1,
// and one in front of it that redirects each blob to blobs.test at
// the first, as registries redirect to their storage. It returns their
// ports.
func testRegistries(t *testing.T) (direct, redirecting string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(u.Host + "/img:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := *r.URL
		to.Scheme, to.Host = "http", "blobs.test:"+u.Port()
		if strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, to.String(), http.StatusTemporaryRedirect)
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(redir.Close)
	ru, _ := url.Parse(redir.URL)
	return u.Port(), ru.Port()
}
