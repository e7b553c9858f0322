package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/buildinfo"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox/gvisor"
)

// versionInfo is what kndl version prints, --json's fields.
type versionInfo struct {
	Version     string `json:"version"`
	Commit      string `json:"commit"`
	Date        string `json:"date"` // the commit's time, RFC 3339, UTC
	Modified    bool   `json:"modified"`
	Go          string `json:"go"`
	Protocol    int    `json:"protocol"`
	ProtocolMin int    `json:"protocol_min"`
	ClaudeCode  string `json:"claude_code"`
	Runsc       string `json:"runsc"`
}

func currentVersion() versionInfo {
	b := buildinfo.Read()
	v := versionInfo{Version: b.Version, Commit: b.Commit, Modified: b.Modified, Go: b.GoVersion,
		Protocol: protocol.Version, ProtocolMin: protocol.MinVersion, ClaudeCode: claude.Version, Runsc: gvisor.Version}
	if !b.Date.IsZero() {
		v.Date = b.Date.UTC().Format(time.RFC3339)
	}
	return v
}

func version(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "version")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	v := currentVersion()
	if *asJSON {
		enc := json.NewEncoder(io.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	or := func(s, none string) string {
		if s == "" || s == "(devel)" {
			return none
		}
		return s
	}
	modified := ""
	if v.Modified {
		modified = " (with uncommitted changes)"
	}
	fmt.Fprintf(io.Stdout, "kndl %s\ncommit      %s%s\ndate        %s\ngo          %s\nprotocol    %d (takes Runners from %d)\nclaude code %s\nrunsc       %s\n",
		or(v.Version, "(no version: built without version control)"), or(v.Commit, "unknown"), modified, or(v.Date, "unknown"),
		v.Go, v.Protocol, v.ProtocolMin, v.ClaudeCode, v.Runsc)
	return nil
}
