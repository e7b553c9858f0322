package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// The relay counts what each model reply spent from the model API's own
// answer, which passes it on its way to Claude Code: the Sandbox can write
// its transcript and its hooks, not this. A streamed answer (SSE) says its
// id, model and input in message_start and its output in message_delta
// (counts that only grow, so the largest of each is kept); a whole answer
// (JSON) says them in its usage, read whole before any of it goes on, so a
// client that stops reading early cannot skip the count. A stream cut
// before its message_delta counts its output as one token per three bytes
// streamed, more than the model's, so cutting a stream spends no less.

// maxCountedJSON bounds a whole (not streamed) model answer the relay
// reads to count it; a model reply is far below it.
const maxCountedJSON = 16 << 20

// maxCountedLine bounds an SSE line the relay keeps to read; message_start
// and message_delta are far below it, a longer line is another event's.
const maxCountedLine = 1 << 20

// countable asks the model for an answer the relay can read: with no
// Accept-Encoding of Claude Code's, Go's transport asks for gzip itself
// and hands the proxy the answer decoded.
func countable(out *http.Request) { out.Header.Del("Accept-Encoding") }

// countUsage is the proxy's ModifyResponse: a model answer's body is
// counted on its way to Claude Code, and each count is told to Counted.
func (r *Relay) countUsage(resp *http.Response) error {
	up, _ := resp.Request.Context().Value(ctxKey{}).(upstream)
	if up.session == "" || r.counted == nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	report := func(u protocol.Usage) { r.counted(up.session, u) }
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		resp.Body = &sseCounter{ReadCloser: resp.Body, report: report}
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxCountedJSON+1))
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("read a model answer to count it: %w", err)
		}
		if len(b) > maxCountedJSON {
			return fmt.Errorf("a model answer past %d bytes, which the relay can't count", maxCountedJSON)
		}
		var m apiMessage
		if json.Unmarshal(b, &m) == nil && m.ID != "" && m.Usage != nil {
			report(protocol.Usage{Message: m.ID, Model: m.Model, Tokens: *m.Usage})
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return nil
}

// apiMessage is what the relay reads of a Messages API answer.
type apiMessage struct {
	ID    string         `json:"id"`
	Model string         `json:"model"`
	Usage *claude.Tokens `json:"usage"`
}

// sseEvent is what the relay reads of a streamed answer's events.
type sseEvent struct {
	Type    string         `json:"type"`
	Message apiMessage     `json:"message"`
	Usage   *claude.Tokens `json:"usage"`
}

// sseCounter reads a streamed model answer's usage as it passes.
type sseCounter struct {
	io.ReadCloser
	report func(protocol.Usage)

	line     []byte
	skip     bool // the line is past maxCountedLine
	reply    protocol.Usage
	started  bool  // message_start read
	ended    bool  // message_delta read
	streamed int64 // bytes since message_start
	done     bool
}

func (c *sseCounter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.feed(p[:n])
	if err != nil {
		c.finish()
	}
	return n, err
}

func (c *sseCounter) Close() error {
	c.finish()
	return c.ReadCloser.Close()
}

func (c *sseCounter) feed(b []byte) {
	if c.started {
		c.streamed += int64(len(b))
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.keep(b)
			return
		}
		c.keep(b[:i])
		if !c.skip {
			c.event(c.line)
		}
		c.line, c.skip = c.line[:0], false
		b = b[i+1:]
	}
}

// keep adds part of a line, dropping a line past maxCountedLine.
func (c *sseCounter) keep(b []byte) {
	if c.skip {
		return
	}
	if len(c.line)+len(b) > maxCountedLine {
		c.line, c.skip = c.line[:0], true
		return
	}
	c.line = append(c.line, b...)
}

// event reads one line of the stream: a data line of message_start or
// message_delta counts.
func (c *sseCounter) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok {
		return
	}
	var ev sseEvent
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch {
	case ev.Type == "message_start" && ev.Message.ID != "" && !c.started:
		c.started = true
		c.reply = protocol.Usage{Message: ev.Message.ID, Model: ev.Message.Model}
		if ev.Message.Usage != nil {
			c.reply.Tokens = *ev.Message.Usage
		}
		c.report(c.reply)
	case ev.Type == "message_delta" && c.started && ev.Usage != nil:
		c.ended = true
		t := &c.reply.Tokens
		t.Input, t.Output = max(t.Input, ev.Usage.Input), max(t.Output, ev.Usage.Output)
		t.CacheRead, t.CacheWrite = max(t.CacheRead, ev.Usage.CacheRead), max(t.CacheWrite, ev.Usage.CacheWrite)
		c.report(c.reply)
	}
}

// finish counts a stream cut before its message_delta.
func (c *sseCounter) finish() {
	if c.done {
		return
	}
	c.done = true
	if c.started && !c.ended {
		c.reply.Output = max(c.reply.Output, c.streamed/3)
		c.report(c.reply)
	}
}

// Cap makes the model route refuse each model request of a Session's run
// from now on, saying why in the model API's error shape, which Claude
// Code shows: the run is past a spend cap. A wake is a new run, which the
// Hub starts only once the cap holds it no more.
func (r *Relay) Cap(sessionID, why string) error {
	return r.withRun(sessionID, func(x *run) { x.capped = why })
}

// refuseCapped answers a model request of a run past a spend cap: 400
// invalid_request_error, which Claude Code shows as it came and does not
// send again.
func refuseCapped(w http.ResponseWriter, why string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{
		"type": "invalid_request_error", "message": "kndl: " + why}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}
