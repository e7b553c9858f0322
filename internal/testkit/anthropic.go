package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Anthropic is a scripted Anthropic Messages API on loopback. Point Claude
// Code at it with ANTHROPIC_BASE_URL=URL. It answers POST /v1/messages
// (streaming SSE or JSON, as asked) from rules a test adds with On, and
// records every request it gets, answered or not.
//
//	api := testkit.NewAnthropic(t, "fake-token")
//	api.On(testkit.PromptContains("make the file"), testkit.Bash("touch /tmp/f"))
//	api.On(testkit.AfterToolResult(), testkit.Text("Done."))
//
// A request no rule matches gets a text reply saying so. A slow turn is a
// long tool (Bash("sleep 30")) or a reply made Slow.
type Anthropic struct {
	// URL is the base URL, http://127.0.0.1:PORT, with no trailing slash.
	URL string

	token string
	srv   *httptest.Server

	mu       sync.Mutex
	rules    []rule
	requests []*Request
}

type rule struct {
	match Matcher
	reply Reply
}

// NewAnthropic starts the fake and closes it when the test ends. When token
// is not empty, every request must carry "authorization: Bearer <token>",
// as Claude Code sends with CLAUDE_CODE_OAUTH_TOKEN; others get 401.
func NewAnthropic(t testing.TB, token string) *Anthropic {
	t.Helper()
	a := &Anthropic{token: token}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL
	t.Cleanup(a.srv.Close)
	return a
}

// On adds a rule: a request to /v1/messages that match accepts is answered
// with reply. Rules are tried in the order added; the first match answers.
func (a *Anthropic) On(match Matcher, reply Reply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rules = append(a.rules, rule{match, reply})
}

// Requests returns every request received so far, in order.
func (a *Anthropic) Requests() []*Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*Request(nil), a.requests...)
}

// Turns returns the recorded model calls answered with a message: POST
// /v1/messages requests neither refused nor failed by a Fail reply.
func (a *Anthropic) Turns() []*Request {
	var out []*Request
	for _, r := range a.Requests() {
		if r.Path == "/v1/messages" && r.Status == http.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

// Request is one request the fake received, kept whole.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	// Params is Body parsed, for /v1/messages and its count_tokens.
	Params MessagesParams
	// Status is what the fake answered; Unscripted is true when no rule
	// matched and the default reply was sent.
	Status     int
	Unscripted bool
}

// MessagesParams is the part of a Messages API request body tests look at.
type MessagesParams struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []Message `json:"messages"`
}

// Message is one turn of the conversation sent to the model. Content is
// always a list: a plain string content arrives as one text block.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Content is a message's content blocks.
type Content []Block

// UnmarshalJSON takes both forms the API accepts: a string or a list of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Block is a content block: text, image, tool_use or tool_result (others
// keep only their Type).
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// image: its source, base64 data with its media type.
	Source *ImageSource `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result: Content is a string or a list of blocks, kept raw.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// ImageSource is an image block's bytes.
type ImageSource struct {
	Type      string `json:"type"` // base64
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// ResultText is a tool_result block's content as text.
func (b Block) ResultText() string {
	var c Content
	if len(b.Content) == 0 || json.Unmarshal(b.Content, &c) != nil {
		return ""
	}
	var parts []string
	for _, x := range c {
		parts = append(parts, x.Text)
	}
	return strings.Join(parts, "\n")
}

// LastUser is the last message with role user: the prompt or tool result
// the model is answering. (Claude Code 2.1 may send a role "system" message
// after it, with the environment.) It is a zero Message if there is none.
func (r *Request) LastUser() Message {
	for i := len(r.Params.Messages) - 1; i >= 0; i-- {
		if m := r.Params.Messages[i]; m.Role == "user" {
			return m
		}
	}
	return Message{}
}

// Texts returns the text blocks of every message sent, in order: the
// earlier prompts and replies the model received with this call.
func (r *Request) Texts() []string {
	var out []string
	for _, m := range r.Params.Messages {
		out = append(out, m.Texts()...)
	}
	return out
}

// Texts returns the text blocks of m in order. Claude Code sends a prompt as
// its own text block, next to <system-reminder> blocks of its own.
func (m Message) Texts() []string {
	var out []string
	for _, b := range m.Content {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

// ToolResults returns the tool_result blocks of m.
func (m Message) ToolResults() []Block { return m.blocks("tool_result") }

// Images returns the image blocks of m.
func (m Message) Images() []Block { return m.blocks("image") }

// blocks returns the blocks of m of one type.
func (m Message) blocks(typ string) []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

// A Matcher picks the requests a rule answers.
type Matcher func(*Request) bool

// PromptContains matches when the last user message is a prompt (not a
// tool result) with a text block containing s.
func PromptContains(s string) Matcher {
	return func(r *Request) bool {
		m := r.LastUser()
		if len(m.ToolResults()) > 0 {
			return false
		}
		for _, t := range m.Texts() {
			if strings.Contains(t, s) {
				return true
			}
		}
		return false
	}
}

// AfterToolResult matches when the last user message carries a tool result.
func AfterToolResult() Matcher {
	return func(r *Request) bool { return len(r.LastUser().ToolResults()) > 0 }
}

// ToolResultContains matches when the last user message carries a tool
// result whose text contains s.
func ToolResultContains(s string) Matcher {
	return func(r *Request) bool {
		for _, b := range r.LastUser().ToolResults() {
			if strings.Contains(b.ResultText(), s) {
				return true
			}
		}
		return false
	}
}

// InSubagent matches the model calls of the subagent whose task prompt (the
// Agent call's prompt) holds marker: a subagent's first user message is
// its task prompt, where the main conversation's is its first prompt.
func InSubagent(marker string) Matcher {
	return func(r *Request) bool {
		for _, m := range r.Params.Messages {
			if m.Role == "user" {
				return strings.Contains(strings.Join(m.Texts(), "\n"), marker)
			}
		}
		return false
	}
}

// Reply is what the fake model answers: content blocks streamed in order,
// then stop_reason tool_use if any block is a tool use, end_turn otherwise.
type Reply struct {
	Blocks []ReplyBlock
	// Delay holds the answer back before its first byte, like a slow model.
	Delay time.Duration
	// Pace is the pause between streamed deltas; text streams a few words
	// per delta, so a long text with a Pace is a reply still streaming.
	Pace time.Duration
	// Err, when set, answers with this API error instead of a message.
	Err *APIError
	// Usage, when set, is the usage the reply reports (WithUsage);
	// otherwise it counts the request's and the reply's bytes roughly.
	Usage *Usage
}

// Usage is the token counts a reply reports, as the real API does: the
// input and cache counts in message_start, the output count in
// message_delta (and all of them in a non-streaming answer).
type Usage struct {
	Input, Output, CacheRead, CacheWrite int
}

// WithUsage returns r reporting u as its usage.
func (r Reply) WithUsage(u Usage) Reply {
	r.Usage = &u
	return r
}

// ReplyBlock is a text block (Text), a tool use (Tool, Input) or, with
// Thinking set, a thinking block.
type ReplyBlock struct {
	Text     string
	Tool     string
	Input    any
	Thinking string
}

// APIError is an error answer, as {"type":"error","error":{…}}.
type APIError struct {
	Status  int
	Type    string // overloaded_error, api_error, rate_limit_error, …
	Message string
}

// Text is a reply of one text block.
func Text(s string) Reply { return Reply{Blocks: []ReplyBlock{{Text: s}}} }

// Bash is a reply that runs command with Claude Code's Bash tool.
func Bash(command string) Reply {
	return ToolUse("Bash", map[string]any{"command": command, "description": "Run a scripted command"})
}

// Agent is a reply that starts a general-purpose subagent with Claude
// Code's Agent tool; it runs in the background (see InSubagent).
func Agent(description, prompt string) Reply {
	return ToolUse("Agent", map[string]any{"description": description, "prompt": prompt, "subagent_type": "general-purpose"})
}

// Thinking is a reply of one thinking block, as with extended thinking on;
// follow it with Then.
func Thinking(s string) Reply { return Reply{Blocks: []ReplyBlock{{Thinking: s}}} }

// ToolUse is a reply of one tool use.
func ToolUse(tool string, input any) Reply {
	return Reply{Blocks: []ReplyBlock{{Tool: tool, Input: input}}}
}

// Then returns r followed by the blocks of next, as one message.
func (r Reply) Then(next Reply) Reply {
	r.Blocks = append(append([]ReplyBlock(nil), r.Blocks...), next.Blocks...)
	return r
}

// Slow returns r held back by delay before it starts, then streamed with
// pace between deltas.
func (r Reply) Slow(delay, pace time.Duration) Reply {
	r.Delay, r.Pace = delay, pace
	return r
}

// Fail is a reply that answers with an API error.
func Fail(status int, typ, message string) Reply {
	return Reply{Err: &APIError{Status: status, Type: typ, Message: message}}
}

func (a *Anthropic) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	// A record is complete before it is shared, and never changed after.
	rec := &Request{Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery,
		Header: req.Header.Clone(), Body: body, Status: http.StatusOK}
	var answer any
	reply := Reply{}
	switch {
	case a.token != "" && req.Header.Get("Authorization") != "Bearer "+a.token:
		// As the real API answers a token it does not know, a placeholder
		// sent past the relay among them.
		rec.Status, answer = http.StatusUnauthorized, errorBody("authentication_error", "Invalid bearer token")
	case req.Method != http.MethodPost || (rec.Path != "/v1/messages" && rec.Path != "/v1/messages/count_tokens"):
		rec.Status, answer = http.StatusNotFound, errorBody("not_found_error", "testkit: no fake for "+req.Method+" "+rec.Path)
	case json.Unmarshal(body, &rec.Params) != nil:
		rec.Status, answer = http.StatusBadRequest, errorBody("invalid_request_error", "testkit: body is not a Messages request")
	case rec.Path == "/v1/messages/count_tokens":
		answer = map[string]int{"input_tokens": tokens(body)}
	default:
		var ok bool
		if reply, ok = a.match(rec); !ok {
			rec.Unscripted = true
			reply = Text("testkit: no scripted reply for this request; last user message: " + summary(rec.LastUser()))
		}
		if reply.Err != nil {
			rec.Status, answer = reply.Err.Status, errorBody(reply.Err.Type, reply.Err.Message)
		}
	}
	a.mu.Lock()
	a.requests = append(a.requests, rec)
	seq := len(a.requests)
	a.mu.Unlock()

	select {
	case <-time.After(reply.Delay):
	case <-req.Context().Done():
		return
	}
	if answer != nil {
		writeJSON(w, rec.Status, answer)
		return
	}
	msg := newMessage(seq, rec.Params.Model, reply, tokens(body))
	if !rec.Params.Stream {
		writeJSON(w, http.StatusOK, msg.final())
		return
	}
	msg.stream(w, req, reply.Pace)
}

func (a *Anthropic) match(r *Request) (Reply, bool) {
	a.mu.Lock()
	rules := a.rules
	a.mu.Unlock()
	// Matchers run unlocked: one may look at Requests.
	for _, ru := range rules {
		if ru.match(r) {
			return ru.reply, true
		}
	}
	return Reply{}, false
}

// message is one assistant message being answered.
type message struct {
	id, model     string
	blocks        []map[string]any // final content blocks
	deltas        [][]map[string]any
	stopReason    string
	input, output int
	// cacheRead and cacheWrite are cache_read_input_tokens and
	// cache_creation_input_tokens.
	cacheRead, cacheWrite int
}

func newMessage(seq int, model string, r Reply, input int) *message {
	m := &message{id: fmt.Sprintf("msg_testkit%04d%s", seq, randID(8)), model: model,
		stopReason: "end_turn", input: input}
	for _, b := range r.Blocks {
		if b.Thinking != "" {
			// The real API streams the thinking, then its signature.
			sig := "testkit-signature-" + randID(16)
			m.blocks = append(m.blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": sig})
			var ds []map[string]any
			for _, c := range chunks(b.Thinking) {
				ds = append(ds, map[string]any{"type": "thinking_delta", "thinking": c})
			}
			m.deltas = append(m.deltas, append(ds, map[string]any{"type": "signature_delta", "signature": sig}))
			m.output += len(b.Thinking)/4 + 1
			continue
		}
		if b.Tool == "" {
			m.blocks = append(m.blocks, map[string]any{"type": "text", "text": b.Text})
			var ds []map[string]any
			for _, c := range chunks(b.Text) {
				ds = append(ds, map[string]any{"type": "text_delta", "text": c})
			}
			m.deltas = append(m.deltas, ds)
			m.output += len(b.Text)/4 + 1
			continue
		}
		input, _ := json.Marshal(b.Input)
		if b.Input == nil {
			input = []byte("{}")
		}
		m.stopReason = "tool_use"
		m.blocks = append(m.blocks, map[string]any{"type": "tool_use",
			"id": "toolu_testkit" + randID(12), "name": b.Tool, "input": json.RawMessage(input)})
		// The real API streams tool input as an empty partial_json, then
		// pieces of the JSON text.
		half := len(input) / 2
		m.deltas = append(m.deltas, []map[string]any{
			{"type": "input_json_delta", "partial_json": ""},
			{"type": "input_json_delta", "partial_json": string(input[:half])},
			{"type": "input_json_delta", "partial_json": string(input[half:])},
		})
		m.output += len(input)/4 + 1
	}
	if u := r.Usage; u != nil {
		m.input, m.output, m.cacheRead, m.cacheWrite = u.Input, u.Output, u.CacheRead, u.CacheWrite
	}
	return m
}

func (m *message) usage(output int) map[string]any {
	return map[string]any{"input_tokens": m.input, "output_tokens": output,
		"cache_creation_input_tokens": m.cacheWrite, "cache_read_input_tokens": m.cacheRead, "service_tier": "standard"}
}

// final is the whole message, as a non-streaming answer.
func (m *message) final() map[string]any {
	return map[string]any{"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": m.blocks, "stop_reason": m.stopReason, "stop_sequence": nil, "usage": m.usage(m.output)}
}

// stream writes the message as the API's server-sent events.
func (m *message) stream(w http.ResponseWriter, req *http.Request, pace time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", "req_testkit"+randID(12))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) bool {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
		return req.Context().Err() == nil
	}
	wait := func() bool {
		if pace == 0 {
			return true
		}
		select {
		case <-time.After(pace):
			return true
		case <-req.Context().Done():
			return false
		}
	}
	start := map[string]any{"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": m.usage(1)}
	if !send("message_start", map[string]any{"type": "message_start", "message": start}) ||
		!send("ping", map[string]any{"type": "ping"}) {
		return
	}
	for i, b := range m.blocks {
		open := map[string]any{"type": b["type"]}
		switch b["type"] {
		case "text":
			open["text"] = ""
		case "thinking":
			open["thinking"], open["signature"] = "", ""
		default:
			open["id"], open["name"], open["input"] = b["id"], b["name"], map[string]any{}
		}
		if !send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": open}) {
			return
		}
		for _, d := range m.deltas[i] {
			if !wait() || !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.output}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits text into deltas of a few words, keeping every byte.
func chunks(s string) []string {
	var out []string
	for len(s) > 0 {
		n := 0
		for words := 0; n < len(s) && words < 3; n++ {
			if s[n] == ' ' {
				words++
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if out == nil {
		out = []string{""}
	}
	return out
}

func summary(m Message) string {
	if rs := m.ToolResults(); len(rs) > 0 {
		return fmt.Sprintf("%s tool result %q", m.Role, rs[0].ResultText())
	}
	return fmt.Sprintf("%s %q", m.Role, strings.Join(m.Texts(), " | "))
}

// tokens estimates a token count the way tests need it: roughly, and
// never zero.
func tokens(body []byte) int { return len(body)/4 + 1 }

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_testkit"+randID(12))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func randID(n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
