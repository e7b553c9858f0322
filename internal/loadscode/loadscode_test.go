package loadscode

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the table in docs/security.md from Table")

// TestTheTableCoversWhatLoadsCodeOrReachesTheNetwork: each name the
// security round named, and each class the keep-out list had, falls under
// a row, in either case; who commits and a team's own names don't.
func TestTheTableCoversWhatLoadsCodeOrReachesTheNetwork(t *testing.T) {
	tests := []struct {
		name        string
		wantMatch   bool
		wantKeptOut bool
	}{
		{"PIP_INDEX_URL", true, false}, {"pip_extra_index_url", true, false}, {"UV_INDEX_URL", true, false},
		{"GOPROXY", true, false}, {"GOFLAGS", true, false}, {"CARGO_HOME", true, false},
		{"CARGO_REGISTRIES_X_INDEX", true, false}, {"RUSTC_WRAPPER", true, false}, {"YARN_REGISTRY", true, false},
		{"BUNDLE_MIRROR__HTTPS://RUBYGEMS__ORG/", true, false},
		{"XDG_CONFIG_HOME", true, true}, {"LESSOPEN", true, true}, {"PAGER", true, true},
		{"LD_PRELOAD", true, true}, {"NODE_OPTIONS", true, true}, {"https_proxy", true, true}, {"HTTP_PROXY", true, true},
		{"npm_config_registry", true, true}, {"GIT_SSH_COMMAND", true, true}, {"GIT_CONFIG_GLOBAL", true, true},
		{"ANTHROPIC_BASE_URL", true, true}, {"SSL_CERT_FILE", true, true}, {"BASH_ENV", true, true}, {"ENV", true, true},
		{"GIT_AUTHOR_NAME", false, false}, {"GIT_COMMITTER_EMAIL", false, false},
		{"DATABASE_URL", false, false}, {"NODE", false, false}, {"MY_NODE_OPTIONS", false, false},
		{"ENVIRONMENT", false, false}, {"LANG", false, false}, {"XDG_CACHE_HOME", false, false}, {"GOPATH", false, false},
	}
	for _, tt := range tests {
		r, ok := Match(tt.name)
		if ok != tt.wantMatch || r.KeptOut != tt.wantKeptOut {
			t.Errorf("Match(%q) = %q, %v, kept out %v; want a match %v, kept out %v", tt.name, r.Pattern, ok, r.KeptOut, tt.wantMatch, tt.wantKeptOut)
		}
	}
	for _, r := range Table {
		if r.Why == "" || strings.ToUpper(r.Pattern) != r.Pattern {
			t.Errorf("row %q: want an upper-case pattern and a why", r.Pattern)
		}
	}
}

const (
	docsPath  = "../../docs/security.md"
	docsBegin = "<!-- loadscode.Table: go test ./internal/loadscode -update rewrites this table -->\n"
	docsEnd   = "<!-- end of loadscode.Table -->\n"
)

// markdown renders Table as docs/security.md lists it.
func markdown() string {
	var b strings.Builder
	b.WriteString("| Names | Kept out of Claude Code | What a value can do |\n|---|---|---|\n")
	for _, r := range Table {
		names := "`" + r.Pattern + "`"
		for i, e := range r.Except {
			names += map[bool]string{true: " but ", false: ", "}[i == 0] + "`" + e + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", names, map[bool]string{true: "yes", false: "no, once marked"}[r.KeptOut], r.Why)
	}
	return b.String()
}

// TestTheDocsListTheTable: docs/security.md lists exactly Table's rows.
func TestTheDocsListTheTable(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	before, rest, ok := strings.Cut(doc, docsBegin)
	got, after, ok2 := strings.Cut(rest, docsEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/security.md has no table between %q and %q", docsBegin, docsEnd)
	}
	want := markdown()
	if *update {
		if err := os.WriteFile(docsPath, []byte(before+docsBegin+want+docsEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("docs/security.md lists\n%s\nwant\n%s(go test ./internal/loadscode -update rewrites it)", got, want)
	}
}
