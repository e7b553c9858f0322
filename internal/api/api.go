// Package api is the Hub's HTTP API on the wire: the JSON bodies the Hub
// sends and takes at /api/, which the CLI and the web UI read and write
// (coder's codersdk). It holds no store rows and imports neither
// internal/store nor internal/hub, so a client imports it alone. Store
// rows carry no json tags: the Hub converts each row to its type here in
// one place (internal/hub/wire.go), whose wire_test.go pins the JSON.
package api

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/protocol"
)

// MaxPromptBytes bounds one prompt's text.
const MaxPromptBytes = 64 << 10

// SessionState is where a Session is in its life.
type SessionState string

const (
	// Starting: its Sandbox and Claude Code are being made or woken.
	Starting SessionState = "starting"
	// Active: Claude Code runs and takes prompts.
	Active SessionState = "active"
	// Frozen: its Runner is away; Claude Code may still run in the Sandbox.
	Frozen SessionState = "frozen"
	// Asleep: Claude Code and the Sandbox are stopped, the disks kept; a
	// prompt or a wake starts them again.
	Asleep SessionState = "asleep"
	// Failed: it could not start; state_detail says why.
	Failed SessionState = "failed"
	// Archived: put away; it takes no prompts.
	Archived SessionState = "archived"
)

// Session is one conversation of Claude Code in its own Sandbox.
type Session struct {
	ID          string       `json:"id"`
	RepoID      string       `json:"repo_id"`
	RepoURL     string       `json:"repo_url"`
	CreatorID   string       `json:"creator_id"`
	RunnerID    string       `json:"runner_id"`
	Title       string       `json:"title"`
	Model       string       `json:"model,omitempty"`
	Effort      string       `json:"effort,omitempty"`
	State       SessionState `json:"state"`
	StateDetail string       `json:"state_detail,omitempty"`
	// Activity is what an Active Session is doing: "" (waiting for a
	// prompt), "turn" (in a Turn) or "question" (waiting for its Creator's
	// answer).
	Activity string `json:"activity,omitempty"`
	// Conversation is whether Claude Code has written the conversation
	// down, so a wake resumes it.
	Conversation bool `json:"conversation"`
	// KeepAwake is whether its Creator asked it to stay awake (the spec's
	// Keep awake). Like Activity, it is left out while false or empty, so
	// a Hub that does not send it yet answers as before.
	KeepAwake bool `json:"keep_awake,omitempty"`
	// ThreadContext is whether its Creator turned on others' comments on
	// its GitHub issue or pull request as context in its history (never
	// prompts); left out while off.
	ThreadContext bool `json:"thread_context,omitempty"`
	// SandboxGit is what git in its Sandbox may do with the Sandbox token
	// the Hub last minted: "write" (push branches, open and merge pull
	// requests), for a Creator GitHub gives push permission on the Repo;
	// "read" (fetch, read pull requests) for a read-only Creator, asked
	// again at each refresh; left out before any token.
	SandboxGit string `json:"sandbox_git,omitempty"`
	// ArchivedAt is when it was archived; its Workspace is purged
	// RUNNER_ARCHIVE_KEEP later.
	ArchivedAt time.Time `json:"archived_at,omitzero"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	// The limits (HUB_MEMBER_MAX_AWAKE, the Repo's Turn limits). Place is
	// its place in its Creator's line for an awake place, from 1, left out
	// while it waits in none. Triggered marks a Session a GitHub trigger
	// started, which its Repo's Turn limits hold; Turns counts its Turns.
	Place     int  `json:"place,omitempty"`
	Triggered bool `json:"triggered,omitempty"`
	Turns     int  `json:"turns,omitempty"`

	// Pull is the newest pull request opened from a branch it pushed, as
	// GitHub last said: the Sessions list's badge. Left out while none.
	Pull *Pull `json:"pull,omitempty"`
	// Spent is what it spent, with the estimated cost, in the Sessions
	// list; left out while nothing, and in a Session's view, which has
	// SessionView.Usage.
	Spent *Spent `json:"spent,omitempty"`
}

// SessionView is a Session with its waiting prompts, the answer to
// creating, showing and updating one.
type SessionView struct {
	Session
	Queue []Prompt `json:"queue"`
	// MCPServers are the Installations its last run started with, which
	// it reaches through the Hub's Gateway.
	MCPServers []protocol.MCPServer `json:"mcp_servers,omitempty"`
	// EnvironmentVersion is the version of its Repo's Environment it last
	// started on (0: the Runner's defaults); EnvironmentWaiting a newer one
	// it gets at its next wake or restart.
	EnvironmentVersion int `json:"environment_version,omitempty"`
	EnvironmentWaiting int `json:"environment_waiting,omitempty"`
	// Branches are the branches the Session pushed, each with the pull
	// requests opened from it, as GitHub last said.
	Branches []Branch `json:"branches,omitempty"`
	// Usage is what it spent, with an estimated cost.
	Usage Spent `json:"usage"`
	// AttemptSet is the attempt set it is an attempt of (GET
	// /api/attempts/{id}), ForkOf what it was forked from; each left out
	// for none. Its own forks are GET /api/sessions/{id}/forks.
	AttemptSet string `json:"attempt_set,omitempty"`
	ForkOf     *Fork  `json:"fork_of,omitempty"`
}

// Branch is a branch a Session pushed to its Repo.
type Branch struct {
	Name     string    `json:"name"`
	URL      string    `json:"url,omitempty"` // on GitHub, when the Repo is there
	PushedAt time.Time `json:"pushed_at"`
	Pulls    []Pull    `json:"pulls,omitempty"`
}

// Pull is a pull request opened from a Session's branch.
type Pull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	URL    string `json:"url"`
	// State is open or closed; Merged is set for a closed one merged.
	State  string `json:"state"`
	Merged bool   `json:"merged,omitempty"`
	Draft  bool   `json:"draft,omitempty"`
	// Checks is its head commit's check runs in a word (passing, failing,
	// pending; "" for none or not known), Review its review decision
	// (approved, changes_requested; "" for none), as GitHub last said
	// while it was open.
	Checks string `json:"checks,omitempty"`
	Review string `json:"review,omitempty"`
}

// Prompt is a prompt waiting for, or given to, a Session.
type Prompt struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	AuthorID  string `json:"author_id"`
	Text      string `json:"text"`
	IsCommand bool   `json:"is_command,omitempty"`
	// State is queued, delivering, delivered or cancelled.
	State       string    `json:"state"`
	CreatedAt   time.Time `json:"created_at"`
	DeliveredAt time.Time `json:"delivered_at,omitempty"`
	// Attachments are the files it carries.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Source is whose words it is when not its author's: auto-fix queues
	// a GitHub review or a failing check on the Creator's behalf.
	Source *PromptSource `json:"source,omitempty"`
}

// PromptSource is whose words a prompt is when auto-fix queued it: Kind
// "review" with the reviewer's GitHub login as Name, or "check" with the
// check's name.
type PromptSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// MaxPromptAttachments bounds the files one prompt carries.
const MaxPromptAttachments = 20

// Attachment is a file a Session's Creator attached to a prompt: uploaded
// with POST /api/sessions/{id}/attachments?name=NAME (the file's bytes as
// the body), then named by a prompt's Attachments. Everyone with access
// lists them (GET .../attachments) and downloads one (GET
// .../attachments/{attachment}), always as a download.
type Attachment struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	// PromptID is the prompt that carries it, once one names it.
	PromptID string `json:"prompt_id,omitempty"`
	// Name is the name it was uploaded with; File its name in the
	// Sandbox, made safe, where Claude reads it.
	Name string `json:"name"`
	File string `json:"file"`
	// Type is the media type sniffed from its bytes, for display only.
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Text is set when it was stored as text, with the Session's Sensitive
	// values masked.
	Text      bool      `json:"text,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// Event is one Event of a Session's transcript, already redacted and
// numbered by Seq: the one shape every answer and socket that carries
// Events uses (GET /api/sessions/{id}/events, /watch, /live).
type Event = protocol.Event

// LiveMessage is one message of a Session's live stream, in the one shape
// every socket that carries it uses: GET /api/sessions/{id}/watch (the
// CLI) and /live (the Session view, which also gets ports and the
// terminal).
type LiveMessage struct {
	// Type is event, session, ports, terminal, terminal.wait,
	// terminal.closed or error.
	Type string `json:"type"`
	// Event is an Event of the transcript, decoded, with its Seq; HTML is
	// Claude's Markdown rendered (the Session view's only).
	Event *Event `json:"event,omitempty"`
	HTML  string `json:"html,omitempty"`
	// Spent is, with a turn_end, what its Turn spent with an estimated
	// cost.
	Spent *Spent `json:"spent,omitempty"`
	// Session is the Session with its queue, sent whenever it changes.
	Session *SessionView `json:"session,omitempty"`
	Ports   *[]Port      `json:"ports,omitempty"`
	Message string       `json:"message,omitempty"`
	// The terminal's: a snapshot and its size, and the pane's bytes.
	Snap bool   `json:"snapshot,omitempty"`
	Cols int    `json:"cols,omitempty"`
	Rows int    `json:"rows,omitempty"`
	Data []byte `json:"data,omitempty"`

	// Attachments are the files a prompt Event's prompt carried.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Source is, for a prompt Event, whose words its header says it is
	// when auto-fix queued it: a reviewer's or a check's, not the
	// Creator's.
	Source *PromptSource `json:"source,omitempty"`
}

// Port is a port of a Session as its view shows it: one its Sandbox
// listens on, or one its Environment offers, with its label, that nothing
// listens on yet.
type Port struct {
	protocol.Port
	// Listening is false for an offered port nothing listens on yet: it
	// has no addresses and no URL, and opens once something listens.
	Listening bool `json:"listening"`
	// Label is the Environment's for the port (devcontainer.json's
	// portsAttributes), "" for none: a person's words, to show as text.
	Label string `json:"label,omitempty"`
	// URL opens it through the Hub; empty when the Hub has no forward
	// address (HUB_FORWARD_URL) or nothing listens.
	URL string `json:"url,omitempty"`
}

// PromptMove is the body of POST /api/sessions/{id}/prompts/{prompt}/move:
// the queued prompt's new place in the queue, from 1 (past the end is
// last).
type PromptMove struct {
	Position int `json:"position"`
}

// Answer is the body of POST /api/sessions/{id}/answer: the Creator's
// answer to the question Claude asks (QuestionID, or the one waiting), one
// Choice per question it holds, in order.
type Answer struct {
	QuestionID string   `json:"question_id,omitempty"`
	Answers    []Choice `json:"answers"`
}

// Choice answers one question: an option by its number (from 1), or the
// person's own words.
type Choice struct {
	Option int    `json:"option,omitempty"`
	Text   string `json:"text,omitempty"`
}

// NewSession is the body of POST /api/sessions.
type NewSession struct {
	Repo      string `json:"repo"`
	Model     string `json:"model,omitempty"`
	Effort    string `json:"effort,omitempty"`
	Prompt    string `json:"prompt"`
	IsCommand bool   `json:"is_command,omitempty"`
	// Runner names the Runner to use, one of the Creator's own or a shared
	// one; empty picks the connected one of those with the fewest running
	// Sessions.
	Runner string `json:"runner,omitempty"`
}

// TriggerLabel is the body of GET and PUT /api/repos/{repo}/trigger-label:
// the label that, added to one of the Repo's issues, starts a Session from
// it; "" for none.
type TriggerLabel struct {
	Label string `json:"label"`
}

// PromptRequest is the body that queues or edits a prompt.
type PromptRequest struct {
	Text      string `json:"text"`
	IsCommand bool   `json:"is_command,omitempty"`
	// Attachments are the ids of files uploaded to the Session for this
	// prompt (POST /api/sessions/{id}/attachments), which it carries to
	// Claude; a queued prompt's stay as they are.
	Attachments []string `json:"attachments,omitempty"`
}

// SessionUpdate is the body of PATCH /api/sessions/{id}: what changes.
type SessionUpdate struct {
	Title  *string `json:"title,omitempty"`
	Model  *string `json:"model,omitempty"`
	Effort *string `json:"effort,omitempty"`
}

// Runner is a paired Runner. It belongs to the Member who paired it
// (CreatedBy), who alone runs Sessions on it unless the Owner shares it.
type Runner struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Shared     bool      `json:"shared,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at,omitempty"`
	RevokedAt  time.Time `json:"revoked_at,omitempty"`
}

// RunnerStatus is a Runner as GET /api/runners shows it.
type RunnerStatus struct {
	Runner
	// Owner is the GitHub login of the Member it belongs to (the dev user's
	// name under kndl dev); empty for one paired on the Hub's machine,
	// which is the Hub's own.
	Owner string `json:"owner,omitempty"`
	// Usable says whether the person asking may run Sessions on it: it is
	// theirs, or shared.
	Usable    bool `json:"usable"`
	Connected bool `json:"connected"`
	// Host is what the Runner's sandbox backend enforces, while connected.
	Host *protocol.HostInfo `json:"host,omitempty"`
	// Load is what its running Sessions ask, while connected; Host.Capacity
	// is its limit.
	// Its running (starting or active) Sessions and the CPUs and memory
	// their Environments reserve, within the Runner's caps.
	Load *protocol.Amount `json:"load,omitempty"`
	// Build is the kndl build it runs, as its hello said: while
	// connected, or at its last hello refused.
	Build *protocol.Build `json:"build,omitempty"`
	// Protocol is the protocol version it agreed with the Hub, while
	// connected.
	Protocol int `json:"protocol,omitempty"`
	// Warning says why it is older than the Hub supports, or why its last
	// hello was refused; empty when neither.
	Warning string `json:"warning,omitempty"`
}

// LoadText is the Runner's load against its capacity, while connected.
func (r RunnerStatus) LoadText() string {
	if r.Load == nil || r.Host == nil {
		return ""
	}
	return FormatLoad(*r.Load, r.Host.Capacity)
}

// FormatLoad says a Runner's load against its capacity, as kndl runner
// ls, the Runners page and a refused start show it.
func FormatLoad(load, capacity protocol.Amount) string {
	part := func(used, limit float64, unit string) string {
		if limit == 0 {
			return fmt.Sprintf("%g %s", used, unit)
		}
		return fmt.Sprintf("%g of %g %s", used, limit, unit)
	}
	return part(float64(load.Sessions), float64(capacity.Sessions), "Sessions") + ", " +
		part(load.CPUs, capacity.CPUs, "CPUs") + ", " +
		part(float64(load.MemoryMiB), float64(capacity.MemoryMiB), "MiB")
}

// CreatedRunner is the answer to pairing a Runner: its token, shown once.
type CreatedRunner struct {
	Runner
	Token string `json:"token"`
}

// User is a Member (or the dev user) as the API shows them.
type User struct {
	ID          string    `json:"id"`
	GitHubLogin string    `json:"github_login,omitempty"`
	Name        string    `json:"name"`
	IsOwner     bool      `json:"is_owner"`
	IsDev       bool      `json:"is_dev"`
	CreatedAt   time.Time `json:"created_at"`
}

// Account is what the API says of a person's own account; secrets only as
// when they were set.
type Account struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	ClaudeTokenSetAt time.Time `json:"claude_token_set_at,omitempty"`
}

// Invite is an Invite as the Owner sees it; never its secret.
type Invite struct {
	ID          string    `json:"id"`
	GitHubLogin string    `json:"github_login"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	UsedAt      time.Time `json:"used_at,omitzero"`
	RevokedAt   time.Time `json:"revoked_at,omitzero"`
}

// InviteCreated is the answer to making an Invite: its link, with the
// secret in the fragment, shown once.
type InviteCreated struct {
	Invite
	URL string `json:"url"`
}

// Repo is a repository Sessions run on, by its URL or path.
type Repo struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Variable is a Repo's Variable or a Shared one (RepoID empty). A
// Sensitive Variable's Value is always empty: the API never shows it.
type Variable struct {
	ID        string `json:"id"`
	RepoID    string `json:"repo_id,omitempty"`
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	Sensitive bool   `json:"sensitive"`
	AtBuild   bool   `json:"at_build"`
	// LoadsCode is the mark its setter gave it (loads_code in the
	// request).
	LoadsCode bool      `json:"loads_code"`
	SetBy     string    `json:"set_by"`
	SetAt     time.Time `json:"set_at"`
	// Shared is set on a Shared variable a Repo links.
	Shared bool `json:"shared,omitempty"`
	// From is the file that set it by applying a draft made from it, such
	// as .devcontainer/devcontainer.json; empty for a person's.
	From string `json:"from,omitempty"`
	// LoadsCodeRule, when set, is the row of the table of names that change
	// how a tool loads code or reaches the network its name falls under
	// (docs/security.md, "Which Variables reach Claude Code"), and why.
	LoadsCodeRule string `json:"loads_code_rule,omitempty"`
}

// VariableRequest is the body that sets a Variable.
type VariableRequest struct {
	Value     string `json:"value"`
	Sensitive bool   `json:"sensitive"`
	AtBuild   bool   `json:"at_build"`
	// LoadsCode marks a Variable whose name changes how a tool loads code
	// or reaches the network: without it such a name is refused, and with
	// it any other name is.
	LoadsCode bool `json:"loads_code,omitempty"`
}

// RepoVariables is a Repo's Environment as the API shows it: its own
// Variables and the Shared ones it links; Sensitive values never.
type RepoVariables struct {
	Repo      Repo       `json:"repo"`
	Variables []Variable `json:"variables"`
	Links     []Variable `json:"links"`
}

// AuditEntry is one act in the Hub's audit log, as GET /api/audit shows it
// to the Owner: who did what, when and from where. It names what the act
// was done to, never a secret (no token, value, cookie or link).
type AuditEntry struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// ActorID is the user who did it; empty for the Hub's own machine or
	// someone the Hub didn't let in. Actor is their login or name then.
	ActorID string `json:"actor_id,omitempty"`
	Actor   string `json:"actor,omitempty"`
	// Via is how they came: browser, cli, github (a sign-in), hub (the
	// Hub's machine).
	Via string `json:"via"`
	// Addr is the client address as the Hub saw it.
	Addr   string `json:"addr,omitempty"`
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Hash is the hex SHA-256 that chains it to the entry before.
	Hash string `json:"hash"`
}

// AuditChain is what walking the audit log's hash chain found, as
// GET /api/audit/verify and kndl audit verify say it.
type AuditChain struct {
	Entries  int64  `json:"entries"`
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash,omitempty"`
	// BrokenAt is the first entry that is missing or doesn't follow from
	// its content and the entry before; 0 when the chain holds.
	BrokenAt int64  `json:"broken_at,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// MCPServer is a remote MCP server's definition, as the Hub shows it and
// takes it (ADR 0020). ID is hub:<slug>; Auth is none, headers or oauth.
type MCPServer struct {
	ID      string         `json:"id"`
	Name    string         `json:"name"`
	URL     string         `json:"url"`
	Auth    string         `json:"auth"`
	Headers []HeaderSecret `json:"headers"`
}

// HeaderSecret is one header secret an MCP server declares: Header is sent
// as Format with {value} replaced by each Installation's own value of Key.
type HeaderSecret struct {
	Key    string `json:"key"`
	Header string `json:"header"`
	Format string `json:"format"`
}

// MCPServerEdit is the answer to an edit of an MCP server: the
// Installations whose values it clears (DryRun: would clear).
type MCPServerEdit struct {
	Server MCPServer `json:"server"`
	DryRun bool      `json:"dry_run"`
	Clears []Cleared `json:"clears"`
}

// Cleared names the header secret values an edit clears on one
// Installation.
type Cleared struct {
	Installation string   `json:"installation"`
	Keys         []string `json:"keys"`
}

// InstallationRequest makes an Installation: Global, or on in Repos
// (their ids).
type InstallationRequest struct {
	ID     string   `json:"id"`
	Server string   `json:"server"`
	Name   string   `json:"name"`
	Global bool     `json:"global"`
	Repos  []string `json:"repos,omitempty"`
}

// Installation is an Installation as a person sees it: the Repos they have
// access to among those it lists, and how many others; each header secret
// by who set its value and when, never the value.
type Installation struct {
	ID          string           `json:"id"`
	Server      string           `json:"server"`
	Name        string           `json:"name"`
	Global      bool             `json:"global"`
	Repos       []string         `json:"repos"`
	HiddenRepos int              `json:"hidden_repos,omitempty"`
	Secrets     []SecretStatus   `json:"secrets"`
	OAuth       *OAuthStatus     `json:"oauth,omitempty"`
	On          *InstallationFor `json:"on,omitempty"`
}

// OAuthStatus is an OAuth server's Installation as anyone sees it: who
// connected its account and when, and its client by id (registered by the
// Hub, or entered) and whether it has a secret; never a token or secret.
type OAuthStatus struct {
	Connected   bool      `json:"connected"`
	ConnectedBy string    `json:"connected_by,omitempty"`
	ConnectedAt time.Time `json:"connected_at,omitzero"`
	ClientID    string    `json:"client_id,omitempty"`
	HasSecret   bool      `json:"has_secret,omitempty"`
	Registered  bool      `json:"registered,omitempty"`
}

// SecretStatus is one header secret of an Installation: who set its value
// and when, or that it needs one.
type SecretStatus struct {
	Key      string    `json:"key"`
	NeedsOne bool      `json:"needs_value"`
	SetBy    string    `json:"set_by,omitempty"` // their name
	SetAt    time.Time `json:"set_at,omitzero"`
}

// InstallationFor is whether an Installation is on for one Repo, and why
// not when it isn't.
type InstallationFor struct {
	Repo string `json:"repo"`
	On   bool   `json:"on"`
	Why  string `json:"why,omitempty"`
}

// InstallationChange is one row of a Repo's log of Installation changes.
type InstallationChange struct {
	At           time.Time `json:"at"`
	Installation string    `json:"installation"`
	Who          string    `json:"who"`
	What         string    `json:"what"`
}

// EnvironmentSettings is one version's settings of a Repo's Environment,
// as the Runner gets them. Zero fields are the Runner's defaults.
type EnvironmentSettings = protocol.EnvironmentSettings

// EgressLine is an egress Policy as people read it: open, or allowlist
// with its entries (none: "allowlist", the relays alone).
func EgressLine(p egress.Policy) string {
	if !p.Restricted() {
		return egress.ModeOpen
	}
	entries := slices.DeleteFunc(slices.Clone(p.Allow), func(e string) bool { return e == egress.LeftOut })
	if len(entries) == 0 {
		return egress.ModeAllowlist
	}
	return egress.ModeAllowlist + ": " + strings.Join(entries, ", ")
}

// EnvNames are the names of an Environment's container env, NAME=value
// each, as people are shown it: its values may be a person's.
func EnvNames(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		out = append(out, name)
	}
	return out
}

// PortsLine is an Environment's offered ports as people read them, each
// with its label quoted: 3000 "Web app", 8080 (none: "none").
func PortsLine(ps []protocol.OfferedPort) string {
	var out []string
	for _, p := range ps {
		if p.Label == "" {
			out = append(out, strconv.Itoa(p.Port))
		} else {
			out = append(out, fmt.Sprintf("%d %q", p.Port, p.Label))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// NextToList is a NextTo as people write it: file=folder, by file.
func NextToList(m map[string]string) []string {
	var out []string
	for _, file := range slices.Sorted(maps.Keys(m)) {
		out = append(out, file+"="+m[file])
	}
	return out
}

// EnvironmentVersion is an applied version: a line of the Repo's change
// log. Version 0 is the Runner's defaults.
type EnvironmentVersion struct {
	RepoID       string              `json:"repo_id"`
	Version      int                 `json:"version"`
	BuildDigest  string              `json:"build_digest"`
	BuildVersion int                 `json:"build_version"`
	Changes      string              `json:"changes"`
	CreatedBy    string              `json:"created_by"`
	CreatedAt    time.Time           `json:"created_at"`
	Settings     EnvironmentSettings `json:"settings"`
}

// TestBuild is a run of a draft's build inputs on a Runner; State is
// running, passed or failed.
type TestBuild struct {
	ID          string    `json:"id"`
	RepoID      string    `json:"repo_id"`
	BuildDigest string    `json:"build_digest"`
	RunnerID    string    `json:"runner_id"`
	State       string    `json:"state"`
	Detail      string    `json:"detail,omitempty"`
	Log         string    `json:"log"`
	StartedBy   string    `json:"started_by"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
}

// EnvironmentDraft is the next version being made.
type EnvironmentDraft struct {
	RepoID      string              `json:"repo_id"`
	BaseVersion int                 `json:"base_version"`
	UpdatedBy   string              `json:"updated_by"`
	UpdatedAt   time.Time           `json:"updated_at"`
	Settings    EnvironmentSettings `json:"settings"`
	Changes     []string            `json:"changes"`
	// NeedsTest: it changes the Build, so it applies only after a Test
	// build of exactly it passed.
	NeedsTest bool       `json:"needs_test"`
	Test      *TestBuild `json:"test,omitempty"`
	// From names the devcontainer.json the draft was made from, if it was.
	From *DraftSource `json:"from,omitempty"`
}

// DraftSource is the devcontainer.json a draft was made from: its path
// in the Repo, the commit it was read at, and what was left out of it.
type DraftSource struct {
	Path   string   `json:"path"`
	Commit string   `json:"commit"`
	Notes  []string `json:"notes,omitempty"`
}

// FromDevcontainer asks for a draft made from the Repo's devcontainer.json
// at its default branch; an empty Path tries .devcontainer/devcontainer.json,
// then .devcontainer.json.
type FromDevcontainer struct {
	Path string `json:"path,omitempty"`
	// Follow, when set, turns following the file on or off: a push that
	// changes it makes a new draft and starts its Test build.
	Follow *bool `json:"follow,omitempty"`
}

// Environment is a Repo's Environment: its current version and its draft.
type Environment struct {
	RepoID  string             `json:"repo_id"`
	Current EnvironmentVersion `json:"current"`
	Draft   *EnvironmentDraft  `json:"draft,omitempty"`
	// Follows is the devcontainer.json a push to which makes a new draft,
	// "" for none.
	Follows string `json:"follows,omitempty"`
}

// RepoLimits are the limits a Repo's Sessions started from GitHub run
// under (GET /api/repos/{repo}/limits): past MaxTurns Turns, or
// MaxTurnHours awake from its first prompt, such a Session sleeps, saying so. 0 is no
// limit. MaxSpend (a day, for all the Repo's Sessions) and
// MaxSessionSpend (one Session's in all), in US dollars as the price table
// estimates it, cap every Session of the Repo, however started; 0 is no
// cap. GitHubAttempts lets a mention of the App with attempts=N (2 to 8)
// start an attempt set of N Sessions, each held to these limits; off by
// default.
type RepoLimits struct {
	MaxTurns        int     `json:"max_turns"`
	MaxTurnHours    float64 `json:"max_turn_hours"`
	MaxSpend        float64 `json:"max_spend"`
	MaxSessionSpend float64 `json:"max_session_spend"`
	GitHubAttempts  bool    `json:"github_attempts"`
}

// RepoLimitsChange is the body of PATCH /api/repos/{repo}/limits: each
// limit given is set, each left out kept.
type RepoLimitsChange struct {
	MaxTurns        *int     `json:"max_turns,omitempty"`
	MaxTurnHours    *float64 `json:"max_turn_hours,omitempty"`
	MaxSpend        *float64 `json:"max_spend,omitempty"`
	MaxSessionSpend *float64 `json:"max_session_spend,omitempty"`
	GitHubAttempts  *bool    `json:"github_attempts,omitempty"`
}

// Changes is a Session's work in its Workspace against the branch it
// started from, as the Changes tab and kndl diff show it: computed by its
// Runner, masked as its Events are (GET /api/sessions/{id}/changes).
type Changes = protocol.Changes

// Notification webhooks (internal/hub/notify).

// NotifyWebhook is one of a Member's notification webhooks; its secret is
// shown only in NotifyWebhookCreated.
type NotifyWebhook struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Format string `json:"format"` // json or slack
	// FailingSince is the first failure since the last delivery, and
	// LastError the latest's; StoppedAt is when the Hub stopped posting
	// to it after a day of failures (editing it starts it again).
	FailingSince time.Time `json:"failing_since,omitzero"`
	LastError    string    `json:"last_error,omitempty"`
	StoppedAt    time.Time `json:"stopped_at,omitzero"`
	CreatedAt    time.Time `json:"created_at"`
}

// NotifyWebhookCreated is a webhook just added, with the secret that signs
// its posts (X-Kndl-Signature-256), shown this once.
type NotifyWebhookCreated struct {
	NotifyWebhook
	Secret string `json:"secret"`
}
