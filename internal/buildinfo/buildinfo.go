// Package buildinfo says which build of kndl this is: its version, commit
// and date. scripts/build-kndl sets them with -ldflags -X from git; a
// binary built otherwise falls back to what the Go toolchain stamps
// (runtime/debug.ReadBuildInfo): the module's version for go install
// kndl.dev/kndl/cmd/kndl@VERSION, and the commit for a go build in a plain
// clone. The script comes first because Go stamps nothing in a git
// worktree, whose .git is a file, and stamps the enclosing repository's
// commit in a worktree nested in another checkout (golang/go#58218); the
// date is the commit's, never the clock's, so two builds of one commit
// stay byte for byte the same. Anything may import it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"time"
)

// Set by scripts/build-kndl with -ldflags -X; empty otherwise.
var (
	version  string
	commit   string
	date     string // RFC 3339
	modified string // "true" when the work tree held uncommitted changes
)

// Info is one build's identity.
type Info struct {
	// Version is a release's tag (v1.2.0), or git describe's name for the
	// commit; else the module's version as Go stamped it, "(devel)" or ""
	// when it stamped none.
	Version string
	// Commit is the commit built, "" when unknown.
	Commit string
	// Date is the commit's time, the build's date: zero when unknown.
	Date time.Time
	// Modified is true when the work tree held uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built it.
	GoVersion string
}

// Read is the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{GoVersion: runtime.Version()}
	}
	return From(bi, version, commit, date, modified)
}

// From is the Info of a binary whose build info is bi and whose -ldflags
// set the other four (each "" when unset): those win over bi's stamps.
func From(bi *debug.BuildInfo, version, commit, date, modified string) Info {
	in := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	stamped := map[string]string{}
	for _, s := range bi.Settings {
		stamped[s.Key] = s.Value
	}
	if commit == "" {
		commit, date, modified = stamped["vcs.revision"], stamped["vcs.time"], stamped["vcs.modified"]
	}
	if version != "" {
		in.Version = version
	}
	in.Commit, in.Modified = commit, modified == "true"
	in.Date, _ = time.Parse(time.RFC3339, date)
	return in
}
