package service

import (
	"strings"
	"testing"
	"time"
)

// TestTheEnvironmentFileReadsBackWhatItWrote: a value is written bare or
// in double quotes and read back the same; one systemd would read
// otherwise is refused, naming its setting.
func TestTheEnvironmentFileReadsBackWhatItWrote(t *testing.T) {
	tests := []struct {
		value string
		line  string // as written; "" when refused
	}{
		{"https://kndl.example.com", "A=https://kndl.example.com"},
		{"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "A=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
		{"box 1", `A="box 1"`},
		{"it's", `A="it's"`},
		{"$HOME", ""},
		{`a"b`, ""},
		{`a\b`, ""},
		{"a\nb", ""},
	}
	for _, tt := range tests {
		m := Machine{Root: t.TempDir()}
		body, err := Env{"A": tt.value}.Render("# header\n")
		if tt.line == "" {
			if err == nil || !strings.Contains(err.Error(), "A holds") {
				t.Errorf("%q: got %q, %v; want refused naming A", tt.value, body, err)
			}
			continue
		}
		if err != nil || body != "# header\n"+tt.line+"\n" {
			t.Errorf("%q: got %q, %v; want %q", tt.value, body, err, tt.line)
			continue
		}
		if err := m.Write(File{Path: "/e", Mode: 0o600, Body: body}); err != nil {
			t.Fatal(err)
		}
		if got, err := m.ReadEnv("/e"); err != nil || got["A"] != tt.value {
			t.Errorf("%q read back: got %q, %v", tt.value, got["A"], err)
		}
	}
}

func TestSpanIsSystemdsTimeSpan(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{24 * time.Hour, "24h"}, {90 * time.Minute, "90min"}, {time.Hour + time.Second, "3601s"},
	}
	for _, tt := range tests {
		if got := Span(tt.d); got != tt.want {
			t.Errorf("Span(%s): got %q, want %q", tt.d, got, tt.want)
		}
	}
}
