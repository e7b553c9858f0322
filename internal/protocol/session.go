package protocol

import (
	"encoding/json"
	"time"

	"kndl.dev/kndl/internal/claude"
)

// Session messages. Hub -> Runner requests: session.start, session.deliver,
// session.stop_turn, session.stop, session.archive, session.restore, session.fork,
// session.answer, session.stop_subagent.
// Runner -> Hub: session.credentials (request), session.events and
// session.exited (ordered notifications).
const (
	TypeSessionStart       = "session.start"
	TypeSessionDeliver     = "session.deliver"
	TypeSessionStopTurn    = "session.stop_turn"
	TypeSessionStop        = "session.stop"
	TypeSessionArchive     = "session.archive"
	TypeSessionRestore     = "session.restore"
	TypeSessionCredentials = "session.credentials"
	TypeSessionEvents      = "session.events"
	TypeSessionExited      = "session.exited"
	TypeSessionAnswer      = "session.answer"
)

// TypeSessionStopSubagent asks the Runner to stop one subagent of a
// Session (SessionSubagent): its next tool call is refused and it ends
// there, while the main conversation goes on.
const TypeSessionStopSubagent = "session.stop_subagent"

// TypeSessionFork asks the Runner of a Session asleep there (From) to copy
// its Workspace, Disks and Claude Code's conversation as a new Session's
// (SessionFork), which then starts as any Session does; the answer is a
// SessionForked.
const TypeSessionFork = "session.fork"

// SessionFork names the new Session and the one it is forked from.
type SessionFork struct {
	SessionID string `json:"session_id"`
	From      string `json:"from"`
}

// SessionForked is what a fork's copy gave: where the conversation it
// carries ends, keyed as SessionEvents' Offsets under the new Session's
// names (empty: none was written), so its transcript is read from there;
// and how it was copied, as its start log says.
type SessionForked struct {
	Offsets map[string]int64 `json:"offsets,omitempty"`
	How     string           `json:"how"`
}

// SessionSubagent names one subagent of a Session. AgentID is Claude
// Code's agent id, as in the subagent's Events' agent.
type SessionSubagent struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
}

// SessionAnswer answers a question Claude asks (AskUserQuestion), whose
// mod hook waits for it: each question's text to its answer, an option's
// label or the person's own words.
type SessionAnswer struct {
	SessionID  string            `json:"session_id"`
	QuestionID string            `json:"question_id"`
	Answers    map[string]string `json:"answers"`
}

// SessionStart asks a Runner to start (or wake) a Session's Claude Code.
// The reply comes once Claude Code runs and the Hub has taken what the
// Runner told of the Session before (session.events, session.exited: up to
// 10 s), or with the error that stopped it.
type SessionStart struct {
	SessionID string `json:"session_id"`
	RepoURL   string `json:"repo_url"`
	Model     string `json:"model,omitempty"`
	Effort    string `json:"effort,omitempty"`
	// Resume wakes a conversation Claude Code wrote down; otherwise it
	// starts a new one with the Session's id.
	Resume bool `json:"resume"`
	// ModToken is this run's mod token; it stays in the Runner's memory.
	ModToken string `json:"mod_token"`
	// Offsets are how far the Hub has stored the transcript, so a wake
	// does not read it again.
	Offsets map[string]int64 `json:"offsets,omitempty"`
	// Environment is the Repo's current version, nil for the Runner's
	// defaults (a Repo with no Environment yet).
	Environment *Environment `json:"environment,omitempty"`
	// MCPServers are the Installations this run reaches through the Hub's
	// Gateway, each as Claude Code's MCP server at the relay's
	// /gateway/<Installation>. No credential of theirs is in it.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
}

// MCPServer is one Installation as the Runner gives it to Claude Code.
type MCPServer struct {
	Installation string `json:"installation"`
	Name         string `json:"name"` // its display name
}

// SessionDeliver asks the Runner to have Claude Code take a prompt: it
// types it, and types it again at once as often as Claude Code does not
// take it, for at most Within. The reply is SessionDelivered. The Hub sends
// a prompt once (since version 3; before, it typed it again itself).
type SessionDeliver struct {
	SessionID string `json:"session_id"`
	PromptID  string `json:"prompt_id"`
	Text      string `json:"text"`
	// Command is set for a slash command or a bash-mode line, which fires
	// no UserPromptSubmit and is never written down as a prompt: its input
	// emptied at Enter is Claude Code taking it.
	Command bool `json:"command,omitempty"`
	// WithinMS is how long the Runner has, in milliseconds from when it
	// reads the request: the Hub's deadline, on the Runner's own clock.
	WithinMS int64 `json:"within_ms"`
	// Attachments are the files the prompt carries: the Runner places each
	// at AttachmentPath and adds its AttachedLine to the text before typing.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Within is how long the Runner has to get the prompt taken.
func (d SessionDeliver) Within() time.Duration { return time.Duration(d.WithinMS) * time.Millisecond }

// SessionDelivered is the Runner's reply to session.deliver: whether
// Claude Code took the prompt (its UserPromptSubmit, the transcript writing
// it down, or for a command its input emptied) within the time it had, and
// how many times it was typed. Not taken, Why says what the last try saw;
// it was not typed again past the deadline, so the Hub may put it back in
// the queue. An error reply (the Session not running here, an attachment
// not fetched) is a prompt not taken too.
type SessionDelivered struct {
	Taken bool   `json:"taken"`
	Tries int    `json:"tries"`
	Why   string `json:"why,omitempty"`
	// Before says Claude Code took the prompt at an earlier session.deliver
	// of the same prompt_id, whose reply was lost (with its connection, or
	// with a Hub that stopped before it recorded it): the Runner typed
	// nothing now (Tries 0), and what the Turn it began did came, before
	// this reply, in session.events. Left out by a Runner before it was
	// added: an optional field, no version step.
	Before bool `json:"before,omitempty"`
}

// SessionRef names a Session: the body of session.stop_turn, .stop,
// .archive, .restore and .credentials.
type SessionRef struct {
	SessionID string `json:"session_id"`
}

// SessionCredentials is the Hub's answer to session.credentials: what the
// Session's Claude Code runs on. Sent only to the Session's own Runner.
type SessionCredentials struct {
	ClaudeToken string `json:"claude_token"`
	// ClaudeTokenInSandbox gives the token to Claude Code's process, as
	// the spec has it (HUB_CLAUDE_TOKEN=sandbox). Otherwise Claude Code
	// gets a placeholder. Either way the Runner's relay holds the token
	// and carries Claude Code's model calls, taking no other credential.
	ClaudeTokenInSandbox bool `json:"claude_token_in_sandbox,omitempty"`
	// Variables are the Repo's Variables and the Shared ones it links,
	// Sensitive values included: the Runner keeps them in memory and gives
	// them to the processes it starts in the Sandbox, in their environment.
	Variables []Variable `json:"variables"`
}

// Variable is one Variable as a Runner receives it.
type Variable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// AtBuild: the Bootstrap script gets it too (and its value is part of
	// the Build's key).
	AtBuild bool `json:"at_build,omitempty"`
}

// SessionEvents carries Events the Runner read from Claude Code's
// transcript, in order.
type SessionEvents struct {
	SessionID string  `json:"session_id"`
	Events    []Event `json:"events"`
	// Hook, when set, is where a hook of the mod says the Turn is; the Hub
	// acts on it once these Events are stored: HookPromptSubmit (Claude
	// Code took the prompt typed), HookStop (the Turn ended).
	Hook string `json:"hook,omitempty"`
	// Offsets are how far into each transcript file (the main one and each
	// subagent's, keyed by path relative to Claude Code's project
	// directory) the Runner has read once these Events are stored, so a
	// restarted Runner resumes there (transcript.Offsets).
	Offsets map[string]int64 `json:"offsets,omitempty"`
	// Typed, on a transcript batch, says one of its prompts is the one the
	// Runner is typing, as Claude Code took it: the Hub takes that prompt
	// as taken though its UserPromptSubmit hook may never come.
	Typed bool `json:"typed,omitempty"`
	// Spent (since version 7) is what model replies spent as the
	// Runner's relay read it from the model API's own answers, each with
	// its Message id; what the Hub counts and shows. Sent alone, never
	// with Events.
	Spent []Usage `json:"spent,omitempty"`
}

// What a SessionEvents' Hook says.
const (
	HookPromptSubmit = "prompt_submit"
	HookStop         = "stop"
)

// SessionExited reports that a Session's Claude Code exited on its own.
type SessionExited struct {
	SessionID string `json:"session_id"`
	Detail    string `json:"detail"`
}

// Event kinds: what a Session's transcript is made of.
const (
	EventLog           = "log"         // a line of the Session's start log (Build, download, clone)
	EventReady         = "ready"       // Claude Code is up and waits for a prompt
	EventPrompt        = "prompt"      // a prompt Claude received
	EventTurnStart     = "turn_start"  // Claude accepted a prompt and works on it
	EventText          = "text"        // Claude's text
	EventThinking      = "thinking"    // Claude's visible thinking
	EventToolUse       = "tool_use"    // a tool call with its input
	EventToolResult    = "tool_result" // a tool call's output
	EventSubagentStart = "subagent_start"
	EventSubagentEnd   = "subagent_end"
	EventTurnEnd       = "turn_end"     // the Turn finished, was interrupted, or failed
	EventQuestion      = "question"     // Claude asks the person something; tool_id is the question's id
	EventAnswer        = "answer"       // the question tool_id answered: input maps each question to its answer
	EventNotification  = "notification" // Claude Code wants attention
	EventError         = "error"        // something failed: the start, the model API
	EventNote          = "note"         // something the Hub or Runner says about the Session
	// EventLimit is the Hub holding the Session at one of its limits: a
	// triggered Session's Turns or Turn time reached (it sleeps), or its
	// Creator's awake Sessions at HUB_MEMBER_MAX_AWAKE (it waits in line).
	// Its text names the limit and the way on.
	EventLimit = "limit"
)

// A subagent's life in Events: subagent_start (agent its id, parent the
// Agent tool call that started it when the Runner learned it, text its
// type); subagent_stop, the Hub's record that its Creator asked it to stop;
// subagent_end, with reason empty when it finished, "stopped" or
// "interrupted".
const EventSubagentStop = "subagent_stop"

// Why a subagent ended, in its subagent_end's Reason.
const (
	SubagentStopped     = "stopped"
	SubagentInterrupted = "interrupted"
)

// Event is one entry of a Session's transcript.
type Event struct {
	Seq  int64     `json:"seq,omitempty"` // set by the Hub
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Text is the prompt, Claude's text, a tool's output, or a message.
	Text string `json:"text,omitempty"`
	// Tool is a tool call's name; ToolID ties a tool_use to its result.
	Tool   string          `json:"tool,omitempty"`
	ToolID string          `json:"tool_id,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	// IsError marks a failed tool call or an errored turn.
	IsError bool `json:"is_error,omitempty"`
	// Agent is the subagent an Event came from; Parent the tool call that
	// started that subagent, so the UI nests it there.
	Agent  string `json:"agent,omitempty"`
	Parent string `json:"parent,omitempty"`
	// Reason says why a Turn ended (done, interrupted, error) or a
	// subagent did (SubagentStopped, SubagentInterrupted; empty when it
	// finished).
	Reason string `json:"reason,omitempty"`
	// Usage is the tokens of the model reply an Event of Claude's came
	// from (text, thinking, tool_use), read from the transcript, which
	// the Sandbox can write: kept with the Event, counted toward nothing
	// (the relay's SessionEvents.Spent is what counts). Left out by a
	// Runner before it was added: an optional field, no version step.
	Usage *Usage `json:"usage,omitempty"`
	// TurnUsage, on a turn_end, is what the Turn spent, by model: set by
	// the Hub as it stores the Event, never taken from a Runner.
	TurnUsage []Usage `json:"turn_usage,omitempty"`
	// Dropped, on the Hub's note that a Session went past its Event
	// budget, is how many of its Events were dropped: set by the Hub,
	// never taken from a Runner.
	Dropped int64 `json:"dropped,omitempty"`
	// Blocked, on a Runner's note of a connection or DNS lookup its egress
	// proxy refused, is the host name the Environment's allowlist left off
	// (egress.CheckHost passes it): the Session view's Allow adds that
	// name. Empty when listing a name would not let it through.
	Blocked string `json:"blocked,omitempty"`
	// Requested, on the Hub's note that the Creator asked the Repo's
	// Members with push to allow a host, is that host: set by the Hub,
	// never taken from a Runner.
	Requested string `json:"requested,omitempty"`
}

// Usage is the tokens model replies of one model used.
type Usage struct {
	// Message is the reply's id (msg_…): set on a reply's own usage, empty
	// on a sum.
	Message string `json:"message,omitempty"`
	Model   string `json:"model"`
	claude.Tokens
}

// ValidSessionID reports whether id has the form of a Session id: a UUID in
// lowercase hex, as Claude Code's --session-id takes it.
func ValidSessionID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
