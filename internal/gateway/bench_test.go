package gateway

import (
	"io"
	"log/slog"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/testkit"
)

// BenchmarkToolCall is one MCP tool call (the SDK's client, streamable
// HTTP) through the Gateway, which looks the run's Installation up in the
// store and adds its key, against the same call made to the server
// directly.
func BenchmarkToolCall(b *testing.B) {
	f := newFixture(b)
	f.g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	up := testkit.NewMCPServer(b, "bench-key-0123")
	f.server(b, "hub:docs", up.URL)
	f.install(b, f.member, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.app.ID}})
	f.setValue(b, f.member, "docs", "bench-key-0123")
	s, err := f.session(b, f.app)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, url string
		header    map[string][]string
	}{
		{"direct", up.URL, map[string][]string{"Authorization": {"Bearer bench-key-0123"}}},
		{"gateway", f.hub(b, s) + "/gateway/docs", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			cs, err := connect(b, c.url, c.header)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				echo(b, cs, "x")
			}
		})
	}
}
