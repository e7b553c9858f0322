package hub

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

func TestMarkdownRendersInert(t *testing.T) {
	tests := []struct{ in, want, never string }{
		{"**bold** and `code`", "<strong>bold</strong>", ""},
		{"<script>alert(1)</script>", "", "<script"},
		{"text <img src=x onerror=alert(1)> more", "", "onerror"},
		{"[x](javascript:alert(1))", `<a href="">x</a>`, "javascript:"},
		{"[x](JaVaScRiPt:alert(1))", `<a href="">x</a>`, "alert(1)"},
		{"[x](data:text/html,<b>hi</b>)", `<a href="">x</a>`, "data:"},
		{"[x](https://example.com/?a=1&b=\"2\")", `href="https://example.com/?a=1&amp;b=%222%22"`, ""},
		{"a < b && c > \"d\"", "a &lt; b &amp;&amp; c &gt; &quot;d&quot;", ""},
		{"<a href=\"javascript:alert(1)\">x</a>", "", "javascript:"},
	}
	for _, tt := range tests {
		got := renderEvent(protocol.Event{Kind: protocol.EventText, Text: tt.in})
		if !strings.Contains(got, tt.want) || (tt.never != "" && strings.Contains(strings.ToLower(got), strings.ToLower(tt.never))) {
			t.Errorf("%q: got %q, want %q and never %q", tt.in, got, tt.want, tt.never)
		}
	}
	if got := renderEvent(protocol.Event{Kind: protocol.EventPrompt, Text: "**x**"}); got != "" {
		t.Errorf("a prompt was rendered as Markdown: %q", got)
	}
}

// BenchmarkRenderEvent renders a typical answer: every text Event is
// rendered once for each open Session view.
func BenchmarkRenderEvent(b *testing.B) {
	text := strings.Repeat("Here is **what I changed** in `main.go`:\n\n- one\n- two\n\n```go\nfunc main() {}\n```\n\n", 20)
	ev := protocol.Event{Kind: protocol.EventText, Text: text}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		renderEvent(ev)
	}
}
