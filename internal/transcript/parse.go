// Package transcript turns Claude Code's transcript files into a Session's
// Events. A Tailer reads the main transcript and every subagent's file by
// byte offset; Follow streams what it reads as JSON lines, the way the
// Runner runs it inside a Sandbox (kndl transcript follow), and a Decoder
// reads that stream back on the Runner's side. The Runner and the kndl
// command import it.
//
// What becomes an Event, as measured on Claude Code 2.1.328 (the golden
// tests in testdata/ were recorded from it):
//
//   - A person's prompt (a user record whose origin is human, or a prompt
//     typed while a turn ran, which Claude Code records as a queued_command
//     attachment) is a prompt. So are a slash command ("/compact") and a
//     bash-mode command ("!ls"), as typed; a bash-mode command's output is a
//     tool_result with Tool "Bash" and no ToolID, and a local command's
//     output (ANSI colours removed) is a note.
//   - Claude's text, visible thinking and tool calls are text, thinking
//     and tool_use; a tool's output is a tool_result (content lists
//     flattened to their text, an image as "[image]").
//   - "[Request interrupted by user]" and "[Request interrupted by user
//     for tool use]" end the Turn: turn_end with Reason "interrupted" (an
//     interrupt fires no hook). The text Claude had streamed so far, which
//     Claude Code writes with isAbortedMidStream, is shown as text.
//   - A task-notification (a background subagent or task finished, which
//     starts a new Turn with no person's prompt) is a note with its summary,
//     such as `Agent "Count files" finished`, with Parent set to the tool
//     call that started the task. The subagent's result is not shown again:
//     its own text already is.
//   - A compaction Claude Code started on its own is a note ("Conversation
//     compacted"); one a person asked for shows as the /compact prompt and
//     its output.
//   - A subagent's records are Events with Agent set to its id and Parent
//     to the Agent tool call that started it. Its task prompt is not
//     repeated (it is the Agent call's input); an interrupt ends it with
//     subagent_end, Reason "interrupted"; an API error in it is an error
//     Event (no hook reports it). Neither of these two was recorded: they
//     follow the main transcript's records. A hook that stopped it (the
//     hook_stopped_continuation attachment, written when the mod answered
//     its tool call's hook with continue false, as a stop from its Creator
//     does) ends it with subagent_end, Reason "stopped" and the hook's
//     stopReason as Text: no SubagentStop hook fires then.
//
// Each model reply's token usage (message.usage) rides on the last Event
// its record makes, as Event.Usage with the reply's id.
//
// Left out: everything the Hub makes from hooks (ready, turn_start, the
// turn_end of a finished Turn, the error of a failed one: its synthetic
// "API Error: …" line is dropped in the main transcript), the synthetic
// "No response requested." Claude Code writes on resume after a prompt a
// killed Claude Code never answered (it is not Claude's; the prompt stays
// shown without an answer), records Claude Code keeps for itself (isMeta,
// compact summaries, attachments other than queued prompts and a
// subagent's stop, api-request*, mode, atis-latch, tools-used, last-prompt,
// cost-state, queue-operation, file-history-snapshot, system records other
// than the two above), and a subagent's task prompt. Record types this
// package does not know are skipped, so a new one never breaks the tail.
package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// Bounds on what one Event carries, so a huge tool output or file write
// does not travel whole to the Hub.
const (
	// MaxText bounds an Event's Text: a longer one is cut to it (at a
	// character boundary) and ends with the marker "\n[kndl: N more bytes
	// not shown]".
	MaxText = 64 << 10
	// MaxInput bounds a tool call's Input: when it is longer, each string
	// in it over maxInputString is cut the same way, with the marker.
	MaxInput       = 64 << 10
	maxInputString = 4 << 10
)

// Interrupt markers: the user records Claude Code writes when Escape stops
// a Turn while Claude streams, and while a tool runs.
const (
	interrupted        = "[Request interrupted by user]"
	interruptedForTool = "[Request interrupted by user for tool use]"
)

// Source says which file a record comes from: the main transcript (the
// zero Source) or a subagent's.
type Source struct {
	// Agent is the subagent's id, as in SubagentStart's agent_id.
	Agent string
	// Parent is the id of the Agent tool call that started it.
	Parent string
}

// record is the part of a transcript line this package reads.
type record struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	Timestamp string `json:"timestamp"`
	UUID      string `json:"uuid"`

	IsMeta                    bool    `json:"isMeta"`
	IsCompactSummary          bool    `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly bool    `json:"isVisibleInTranscriptOnly"`
	IsAPIErrorMessage         bool    `json:"isApiErrorMessage"`
	Origin                    *origin `json:"origin"`

	Message *struct {
		ID      string         `json:"id"`
		Model   string         `json:"model"`
		Content content        `json:"content"`
		Usage   *claude.Tokens `json:"usage"`
	} `json:"message"`
	// Content is a system record's text.
	Content         json.RawMessage `json:"content"`
	CompactMetadata struct {
		Trigger string `json:"trigger"`
	} `json:"compactMetadata"`
	Attachment *struct {
		Type        string  `json:"type"`
		Prompt      content `json:"prompt"`
		CommandMode string  `json:"commandMode"`
		Origin      *origin `json:"origin"`
		// Message is a hook_stopped_continuation's stopReason.
		Message string `json:"message"`
	} `json:"attachment"`
}

type origin struct {
	Kind string `json:"kind"`
}

// content is a message's content: a string (one text block) or blocks.
type content []block

type block struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result: Content is a string or blocks.
	ToolUseID string  `json:"tool_use_id"`
	Content   content `json:"content"`
	IsError   bool    `json:"is_error"`
}

// stringBlock marks a content given as a string rather than blocks.
const stringBlock = "string"

func (c *content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = content{{Type: stringBlock, Text: s}}
		return nil
	}
	type blocks content
	return json.Unmarshal(b, (*blocks)(c))
}

// str is the content if it was given as a string.
func (c content) str() (string, bool) {
	if len(c) == 1 && c[0].Type == stringBlock {
		return c[0].Text, true
	}
	return "", false
}

// flatten is the content as text: text blocks joined by newlines, an image
// as "[image]", other blocks left out.
func (c content) flatten() string {
	var parts []string
	for _, b := range c {
		switch b.Type {
		case stringBlock, "text":
			parts = append(parts, b.Text)
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, "\n")
}

// Parse turns one transcript line from src into Events, in order; most
// lines make none. It returns an error only for a line that is not a JSON
// object.
func Parse(line []byte, src Source) ([]protocol.Event, error) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("transcript line is not a record: %w", err)
	}
	at, _ := time.Parse(time.RFC3339Nano, r.Timestamp)
	p := parser{src: src, at: at}
	switch r.Type {
	case "assistant":
		p.assistant(&r)
	case "user":
		p.user(&r)
	case "attachment":
		switch a := r.Attachment; {
		case a == nil:
		case a.Type == "queued_command" && a.CommandMode == "bash":
			p.add(protocol.Event{Kind: protocol.EventPrompt, Text: "!" + a.Prompt.flatten()})
		case a.Type == "queued_command":
			p.prompt(a.Prompt.flatten(), a.Origin)
		case a.Type == "hook_stopped_continuation" && src.Agent != "":
			// Measured on 2.1.328: the subagent makes no request after it.
			p.add(protocol.Event{Kind: protocol.EventSubagentEnd, Reason: protocol.SubagentStopped, Text: a.Message})
		}
	case "system":
		p.system(&r)
	}
	return p.events, nil
}

// parser collects the Events of one record.
type parser struct {
	src    Source
	at     time.Time
	events []protocol.Event
}

func (p *parser) add(e protocol.Event) {
	e.At = p.at
	if e.Agent == "" {
		e.Agent = p.src.Agent
	}
	if e.Parent == "" {
		e.Parent = p.src.Parent
	}
	e.Text = capText(e.Text)
	p.events = append(p.events, e)
}

func (p *parser) assistant(r *record) {
	if r.Message == nil {
		return
	}
	if r.IsAPIErrorMessage {
		// The main transcript's is reported by the StopFailure hook.
		if p.src.Agent != "" {
			p.add(protocol.Event{Kind: protocol.EventError, Text: r.Message.Content.flatten(), IsError: true})
		}
		return
	}
	if r.Message.Model == "<synthetic>" {
		return // "No response requested." after a resume: not Claude's
	}
	first := len(p.events)
	for _, b := range r.Message.Content {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				p.add(protocol.Event{Kind: protocol.EventText, Text: b.Text})
			}
		case "thinking":
			if strings.TrimSpace(b.Thinking) != "" {
				p.add(protocol.Event{Kind: protocol.EventThinking, Text: b.Thinking})
			}
		case "tool_use", "server_tool_use":
			p.add(protocol.Event{Kind: protocol.EventToolUse, Tool: b.Name, ToolID: b.ID, Input: capInput(b.Input)})
		}
	}
	if u := r.usage(); u != nil && len(p.events) > first {
		p.events[len(p.events)-1].Usage = u
	}
}

// usage is the model reply's usage an assistant record carries, keyed by
// the reply's id (the record's own id where it names none). Claude Code
// writes each of a reply's blocks as a record with the reply's usage, so
// the last Event of each carries it and the Hub counts the reply once; a
// record that makes no Event (a redacted thinking block) leaves it to its
// reply's other records.
func (r *record) usage() *protocol.Usage {
	m := r.Message
	if m.Usage == nil {
		return nil
	}
	id := m.ID
	if id == "" {
		id = r.UUID
	}
	if id == "" {
		return nil // nothing to count it once by
	}
	return &protocol.Usage{Message: id, Model: m.Model, Tokens: *m.Usage}
}

func (p *parser) user(r *record) {
	if r.Message == nil || r.IsMeta || r.IsCompactSummary || r.IsVisibleInTranscriptOnly {
		return
	}
	if s, ok := r.Message.Content.str(); ok {
		if r.Origin != nil {
			p.turnStart()
			p.prompt(s, r.Origin)
		} else {
			p.local(s)
		}
		return
	}
	var texts content
	for _, b := range r.Message.Content {
		switch {
		case b.Type == "tool_result":
			p.add(protocol.Event{Kind: protocol.EventToolResult, ToolID: b.ToolUseID, Text: b.Content.flatten(), IsError: b.IsError})
		case b.Type == "text" && (b.Text == interrupted || b.Text == interruptedForTool):
			p.interrupted()
		case b.Type == "text" || b.Type == "image":
			texts = append(texts, b)
		}
	}
	if len(texts) > 0 && r.Origin != nil {
		p.turnStart()
		p.prompt(texts.flatten(), r.Origin)
	}
}

// turnStart marks a new Turn: a prompt record (not a queued one, which
// joins the running Turn) starts one.
func (p *parser) turnStart() {
	if p.src.Agent == "" {
		p.add(protocol.Event{Kind: protocol.EventTurnStart})
	}
}

// interrupted ends the Turn, or in a subagent's file the subagent.
func (p *parser) interrupted() {
	if p.src.Agent != "" {
		p.add(protocol.Event{Kind: protocol.EventSubagentEnd, Reason: "interrupted"})
	} else {
		p.add(protocol.Event{Kind: protocol.EventTurnEnd, Reason: "interrupted"})
	}
}

// prompt is a prompt Claude received, from whom origin says.
func (p *parser) prompt(text string, o *origin) {
	switch {
	case o == nil || o.Kind == "human":
		if text != "" {
			p.add(protocol.Event{Kind: protocol.EventPrompt, Text: text})
		}
	case o.Kind == "task-notification":
		summary := tag(text, "summary")
		if summary == "" {
			summary = "A background task finished."
		}
		p.add(protocol.Event{Kind: protocol.EventNote, Text: summary, Parent: tag(text, "tool-use-id")})
	default:
		// Another origin (a scheduled wakeup, say): Claude Code started a
		// Turn on its own; say so with what it sent.
		p.add(protocol.Event{Kind: protocol.EventNote, Text: text})
	}
}

// local handles the user records Claude Code writes for what a person ran
// in it directly: slash commands, bash mode, their output.
func (p *parser) local(s string) {
	switch {
	case s == interrupted || s == interruptedForTool:
		p.interrupted()
	case strings.HasPrefix(s, "<bash-input>"):
		p.add(protocol.Event{Kind: protocol.EventPrompt, Text: "!" + tag(s, "bash-input")})
	case strings.HasPrefix(s, "<bash-stdout>"):
		out := tag(s, "bash-stdout")
		if e := tag(s, "bash-stderr"); e != "" {
			out = strings.TrimSuffix(out+"\n"+e, "\n")
		}
		p.add(protocol.Event{Kind: protocol.EventToolResult, Tool: "Bash", Text: stripANSI(out)})
	case strings.HasPrefix(s, "<command-name>"):
		cmd := tag(s, "command-name")
		if args := tag(s, "command-args"); args != "" {
			cmd += " " + args
		}
		p.add(protocol.Event{Kind: protocol.EventPrompt, Text: cmd})
	case strings.HasPrefix(s, "<local-command-stdout>"):
		if out := strings.TrimSpace(stripANSI(tag(s, "local-command-stdout"))); out != "" {
			p.add(protocol.Event{Kind: protocol.EventNote, Text: out})
		}
	}
	// Anything else without an origin (a subagent's task prompt) is left
	// out.
}

func (p *parser) system(r *record) {
	var s string
	json.Unmarshal(r.Content, &s)
	switch r.Subtype {
	case "compact_boundary":
		if r.CompactMetadata.Trigger == "manual" {
			return // the /compact prompt and its output say so
		}
		if s == "" {
			s = "Conversation compacted"
		}
		p.add(protocol.Event{Kind: protocol.EventNote, Text: s})
	case "local_command":
		p.local(s)
	case "turn_duration":
		// Written once a Turn is done and only then: the transcript's own
		// turn end, in its place after the Turn's last words (the Stop hook
		// fires before Claude Code has written them).
		if p.src.Agent == "" {
			p.add(protocol.Event{Kind: protocol.EventTurnEnd, Reason: "done"})
		}
	}
}

// tag is the text between <name> and </name> in s, or "".
func tag(s, name string) string {
	_, rest, ok := strings.Cut(s, "<"+name+">")
	if !ok {
		return ""
	}
	inner, _, _ := strings.Cut(rest, "</"+name+">")
	return inner
}

var ansiRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`) })

func stripANSI(s string) string { return ansiRE().ReplaceAllString(s, "") }

// capText cuts s to max bytes at a character boundary, with the marker.
func capText(s string) string { return cut(s, MaxText) }

func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[kndl: %d more bytes not shown]", len(s)-n)
}

// capInput bounds a tool call's input (see MaxInput).
func capInput(in json.RawMessage) json.RawMessage {
	if len(in) <= MaxInput {
		return in
	}
	var v any
	if json.Unmarshal(in, &v) != nil {
		return nil
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return cut(x, maxInputString)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(walk(v))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
