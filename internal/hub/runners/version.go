package runners

import (
	"fmt"

	"kndl.dev/kndl/internal/protocol"
)

// VersionWarning says why a Runner is older than the Hub supports, ""
// when it is not. The protocol decides first: a Runner that agreed on a
// version below the Hub's protocol.Version is taken (down to
// protocol.MinVersion) but lacks what came since, which docs/protocol.md's
// history names. At the same version, a build whose commit is older than
// the Hub's runs the protocol as it was then, its fixes missing; a build
// with no date (built outside scripts/build-kndl and a clone) is not
// judged. A Runner below protocol.MinVersion is refused at its hello
// (Conns.Refused) and never gets here.
func VersionWarning(agreed int, runner, hub protocol.Build) string {
	if agreed < protocol.Version {
		return fmt.Sprintf("It speaks protocol version %d, older than the Hub's %d: its Sessions run, without what came since; upgrade the Runner.",
			agreed, protocol.Version)
	}
	if !runner.Date.IsZero() && !hub.Date.IsZero() && runner.Date.Before(hub.Date) {
		return fmt.Sprintf("Its build (%s) is older than the Hub's (%s): upgrade the Runner.", BuildText(runner), BuildText(hub))
	}
	return ""
}

// BuildText is a build as the Runners page and the Hub's log show it:
// "v1.2.0, 1ec988f of 2026-12-05".
func BuildText(b protocol.Build) string {
	s := b.Version
	if s == "" {
		s = "unknown version"
	}
	if b.Commit != "" {
		s += ", " + b.Commit[:min(len(b.Commit), 7)]
	}
	if !b.Date.IsZero() {
		s += " of " + b.Date.UTC().Format("2006-01-02")
	}
	return s
}
