// Package protocol is the Hub<->Runner protocol: versioned JSON frames over
// one WebSocket that the Runner dials out, with request/reply by id and
// one-way notifications. docs/protocol.md documents every message. The Hub
// and the Runner import it.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"kndl.dev/kndl/internal/buildinfo"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
)

// Version is the newest protocol version this build speaks; MinVersion the
// oldest. The pair agree on the highest version both speak, in the hello.
//
// History:
//
//	1 (2026-11-30, unreleased): hello (with the Sessions running), reply,
//	  error; session.start, .deliver, .stop_turn, .stop, .credentials,
//	  .events, .exited, .ports, .dial, .file; terminal.open, .close,
//	  .input, .resize, .frame; streams at /runner/stream/{id}.
//	2 (2026-12-01, unreleased): the Runner merges the mod's hooks and the
//	  transcript into one ordered stream of session.events (with hook
//	  signals); the Hub's /mod/hook route is gone; session.archive,
//	  .restore and .answer; session.deliver's attachments, fetched with
//	  session.attachment over a stream; session.github_token and
//	  .clone_token; session.start's mcp_servers, the Installations Claude
//	  Code reaches through the Hub's Gateway; session.start's and
//	  env.test's environment.dependency_folders, .next_to and .docker.
//	3 (2026-12-02, unreleased): the Runner owns typing a prompt again,
//	  and a frame's lane and once.
//	  session.deliver carries within_ms, the time the Runner has, and
//	  command (retry is gone): the Hub sends a prompt once, and the Runner
//	  types it again at once each time Claude Code does not take it, and
//	  replies session.delivered, taken or not. A version 2 Runner, which
//	  types once and leaves typing again to the Hub, is refused.
//	  The Runner's outbox sends each Session's messages in a lane of their
//	  own, the Hub handles an ordered type's frames in order per lane and
//	  lanes side by side, and takes a message sent again after a late
//	  reply once.
//	4 (2026-12-02, unreleased): session.credentials' claude_token_in_sandbox;
//	  without it the Runner's relay holds the Creator's token and Claude
//	  Code gets a placeholder. A version 3 Runner, which would give the
//	  token to Claude Code's process whatever the Hub says, is refused.
//	  session.start's environment.egress: the Session's Sandbox reaches
//	  the internet (open, or absent) or only its allowlist; a version 3
//	  Runner, refused, would leave it open.
//	5 (2026-12-02, unreleased): hello's models, the table of the models
//	  and efforts the Runner's pinned Claude Code takes; the Hub offers a
//	  Creator only what every Runner they may use takes, and refuses a
//	  hello without one. A version 4 Runner, which reports none, is
//	  refused: the Hub could not say what it runs.
//	6 (2026-12-02, unreleased): session.diff, a Session's changes that
//	  the Runner computes with git in the Workspace on its host, sent over
//	  a stream. A version 5 Runner is still taken: it lacks only this,
//	  and the Hub says its Sessions' changes wait for the Runner's update.
//	  Also session.egress: an awake Session's allowlist, its hosts changed, swaps in its Runner's
//	  egress gate at once; a switch between open and allowlist applies at
//	  the next wake. Additive: a version 5 Runner refuses the unknown
//	  request, and its Sessions take the change at their next wake.
//	7 (2026-12-05, unreleased): the Runner's git relay. The Runner holds
//	  session.github_token's token in memory and no longer writes it into
//	  the Sandbox, whose git reaches the Repo through the relay; it sends
//	  session.pushed for each push GitHub took, and the Hub records a
//	  Session's branches from those alone (no longer from git push's
//	  output in the transcript). session.start's environment.branch_prefix.
//	  An older Runner is still taken, but the Hub refuses it
//	  session.github_token (GitRelayVersion): it would put the token in
//	  the Sandbox. Its Sessions run with no GitHub token, and say so.
//	  Also in 7: session.events' spent, what model
//	  replies spent as the Runner's relay read it from the model API's
//	  answers; the Hub counts usage from it alone, no longer from the
//	  transcript's usage, which the Sandbox can write. session.capped: the
//	  relay refuses a Session's model requests past a spend cap. A version
//	  5 or 6 Runner's Sessions count no usage.
//	8 (2026-12-05, unreleased): session.check, the Environment's check
//	  run in an attempt's Sandbox after its Turn; session.start's
//	  environment.check. Additive: an older Runner's attempts go unchecked,
//	  their check saying why. runner.pool: what a Runner's warm
//	  pool holds, for the Hub's /metrics. environment.features: Dev
//	  Container Features the Build installs.
const (
	Version    = 8
	MinVersion = 5
)

// GitRelayVersion is the first version whose Runner holds the GitHub token
// in its git relay; the Hub mints none for an older one.
const GitRelayVersion = 7

// MaxFrameBytes bounds one frame. A bigger one closes the connection
// (WebSocket status 1009): a peer that sends it is broken or hostile.
const MaxFrameBytes = 1 << 20

// Frame types every version has.
const (
	// TypeHello is the Runner's first request; the Hub replies with Welcome.
	TypeHello = "hello"
	// TypeReply answers a request with the request's id.
	TypeReply = "reply"
	// TypeError reports a frame that could not be handled and had no id to
	// reply to.
	TypeError = "error"
)

// Frame is one message on the wire. A request has an ID and gets exactly one
// reply with that ID; a notification has none.
type Frame struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	// Lane names the order a frame keeps (a Session's id): the receiver
	// handles an ordered type's frames of one lane one at a time, in
	// arrival order, and different lanes side by side. Empty is a lane
	// too.
	Lane string `json:"lane,omitempty"`
	// Once names a message that may be sent again (its reply late or
	// lost): the receiver takes a once it took last in the frame's lane
	// as done, without handling it again.
	Once  string          `json:"once,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

var typeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`) })

// Decode parses one frame, rejecting what is not a well-formed frame: not a
// JSON object, a missing or malformed type, an over-long id, or a reply
// without an id.
func Decode(b []byte) (Frame, error) {
	if len(b) > MaxFrameBytes {
		return Frame{}, fmt.Errorf("frame of %d bytes is over the %d-byte limit: %w", len(b), MaxFrameBytes, errdefs.ErrInvalid)
	}
	var f Frame
	if err := json.Unmarshal(b, &f); err != nil {
		return Frame{}, fmt.Errorf("malformed frame: %v: %w", err, errdefs.ErrInvalid)
	}
	switch {
	case !typeRE().MatchString(f.Type):
		return Frame{}, fmt.Errorf("malformed frame: type %q: %w", truncate(f.Type, 64), errdefs.ErrInvalid)
	case len(f.ID) > 64 || len(f.Lane) > 64 || len(f.Once) > 64:
		return Frame{}, fmt.Errorf("malformed frame: id, lane or once longer than 64 bytes: %w", errdefs.ErrInvalid)
	case f.Type == TypeReply && f.ID == "":
		return Frame{}, fmt.Errorf("malformed frame: reply without id: %w", errdefs.ErrInvalid)
	}
	return f, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Error is an error carried in a frame. Its Code is one of errdefs' classes,
// so errors.Is works across the wire.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

var codes = []struct {
	code string
	err  error
}{
	{"not_found", errdefs.ErrNotFound},
	{"conflict", errdefs.ErrConflict},
	{"invalid", errdefs.ErrInvalid},
	{"too_large", errdefs.ErrTooLarge},
	{"unavailable", errdefs.ErrUnavailable},
	{"forbidden", errdefs.ErrForbidden},
	{"unauthorized", errdefs.ErrUnauthorized},
}

// Unwrap maps the code back to its errdefs class.
func (e *Error) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err
		}
	}
	return nil
}

// ErrorOf turns err into a frame Error, keeping its class.
func ErrorOf(err error) *Error {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return &Error{Code: c.code, Message: err.Error()}
		}
	}
	return &Error{Code: "internal", Message: err.Error()}
}

// Hello is the Runner's first request.
type Hello struct {
	MinVersion int    `json:"min_version"`
	MaxVersion int    `json:"max_version"`
	Name       string `json:"name,omitempty"`
	// Host says what the Runner's sandbox backend can enforce.
	Host HostInfo `json:"host"`
	// Sessions are the Sessions whose Claude Code runs on this Runner now:
	// after a reconnect, or after the Runner itself restarted and found them
	// still running in their Sandboxes.
	Sessions []string `json:"sessions,omitempty"`
	// Clock is the Runner's time as it sent the hello, so the Hub can say
	// when the two clocks are apart.
	Clock time.Time `json:"clock,omitzero"`
	// Models are the models and efforts the Runner's Claude Code takes
	// (claude.Models), which the Hub offers only where every Runner a
	// Creator may use takes them.
	Models claude.Table `json:"models"`
	// Build is the kndl build the Runner runs (kndl version), which the
	// Runners page shows. Left out by a Runner before it was added: an
	// optional field, no version step.
	Build Build `json:"build,omitzero"`
}

// Build names a build of kndl: its version, commit and the commit's
// time (buildinfo.Info). Each is empty when the build does not know it.
type Build struct {
	Version string    `json:"version,omitempty"`
	Commit  string    `json:"commit,omitempty"`
	Date    time.Time `json:"date,omitzero"`
}

// ThisBuild is the running binary's Build.
func ThisBuild() Build {
	in := buildinfo.Read()
	return Build{Version: in.Version, Commit: in.Commit, Date: in.Date}
}

// HostInfo is a Runner's sandbox backend and what it can enforce.
type HostInfo struct {
	Backend      string   `json:"backend"`
	Limits       []string `json:"limits,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	MaxCPUs      float64  `json:"max_cpus,omitempty"`
	MaxMemoryMiB int      `json:"max_memory_mib,omitempty"`
	// Capacity is what the Runner offers all its Sessions together: the
	// Hub places no Session beyond it.
	// A zero field is no limit.
	Capacity Amount `json:"capacity"`
}

// Amount is a count of Sessions and the CPUs and memory their
// Environments reserve: a Runner's capacity, or its load.
type Amount struct {
	Sessions  int     `json:"sessions"`
	CPUs      float64 `json:"cpus"`
	MemoryMiB int     `json:"memory_mib"`
}

// Welcome is the Hub's reply to Hello.
type Welcome struct {
	Version  int    `json:"version"`
	RunnerID string `json:"runner_id"`
	// Sessions are the running Sessions the Hub takes back, each with a
	// fresh mod token; the Runner stops the others it reported.
	Sessions []ResumedSession `json:"sessions,omitempty"`
}

// ResumedSession is a running Session the Hub takes back after a
// reconnect.
type ResumedSession struct {
	SessionID string           `json:"session_id"`
	ModToken  string           `json:"mod_token"`
	Offsets   map[string]int64 `json:"offsets,omitempty"`
}

// Negotiate picks the highest version both sides speak, or fails naming
// both ranges.
func Negotiate(h Hello) (int, error) {
	v := min(h.MaxVersion, Version)
	if v < max(h.MinVersion, MinVersion) {
		return 0, fmt.Errorf("no common protocol version: runner speaks %d..%d, hub %d..%d; upgrade the older side: %w",
			h.MinVersion, h.MaxVersion, MinVersion, Version, errdefs.ErrInvalid)
	}
	return v, nil
}
