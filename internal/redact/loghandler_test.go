package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestLogHandlerScrubsMessagesAndAttributes(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil)))
	const tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	log.With("url", "https://bot:"+tok+"@github.com/x").Info("clone with "+tok+" failed",
		"err", errors.New("auth "+tok), "group", slog.GroupValue(slog.String("k", tok)), "sha", "9fceb02d0ae598e95dc970b74767f19372d61af8")
	out := buf.String()
	if strings.Contains(out, "ghp_0123") {
		t.Fatalf("the log holds the token: %s", out)
	}
	if !strings.Contains(out, "9fceb02d0ae598e95dc970b74767f19372d61af8") {
		t.Fatalf("a commit SHA was masked: %s", out)
	}
}
