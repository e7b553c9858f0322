package gateway

import (
	"io"
	"log/slog"
	"testing"
)

// BenchmarkToolCall is one MCP tool call (the SDK's client, streamable
// HTTP) through the Gateway, which looks the run's Installation up in the
// store and adds its key, against the same call made to the server
// directly.
func BenchmarkToolCall(b *testing.B) {
	f := newFixture(b)
	f.g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, up := f.docsSession(b, "bench-key-0123", "bench-key-0123")
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
