// Package tmux speaks tmux's control mode (tmux -C): the Runner keeps one
// control client per Session, inside the Sandbox, and through it starts
// Claude Code with values that must stay off every command line, types
// prompts, and reads the pane's output for the terminal mirror. Only
// internal/runner imports it.
package tmux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Control is one control-mode client.
type Control struct {
	w        io.Writer
	onOutput func(pane string, data []byte)

	cmdMu   sync.Mutex // one command at a time, so replies pair in order
	outputs uint64     // %output notifications read so far; read goroutine only
	mu      sync.Mutex
	waiting chan reply // the reply the current command waits for
	done    chan struct{}
	err     error
}

type reply struct {
	lines []string
	err   error
	mark  uint64 // %output notifications read before the reply ended
}

// ErrClosed is returned once the control client has gone.
var ErrClosed = errors.New("tmux control client closed")

// NewControl reads a control client's output from r and sends commands to
// w. onOutput, if set, gets each %output notification's pane and unescaped
// bytes, in order, on the reading goroutine. It returns once tmux has
// answered the client's own first command, so later replies pair with
// later commands.
func NewControl(w io.Writer, r io.Reader, onOutput func(pane string, data []byte)) (*Control, error) {
	c := &Control{w: w, onOutput: onOutput, done: make(chan struct{}), waiting: make(chan reply, 1)}
	go c.read(r)
	select {
	case rep := <-c.waiting:
		if rep.err != nil {
			return nil, fmt.Errorf("tmux control client: %w", rep.err)
		}
		return c, nil
	case <-c.done:
		return nil, c.err
	}
}

func (c *Control) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var block []string
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "%begin "):
			in, block = true, nil
		case in && (strings.HasPrefix(line, "%end ") || strings.HasPrefix(line, "%error ")):
			in = false
			rep := reply{lines: block, mark: c.outputs}
			if strings.HasPrefix(line, "%error ") {
				rep.err = errors.New(strings.Join(block, "; "))
			}
			c.waiting <- rep
		case in:
			block = append(block, line)
		case strings.HasPrefix(line, "%output "):
			c.outputs++
			if c.onOutput != nil {
				pane, data, _ := strings.Cut(line[len("%output "):], " ")
				c.onOutput(pane, Unescape(data))
			}
		case strings.HasPrefix(line, "%exit"):
			c.close(fmt.Errorf("%w: %s", ErrClosed, line))
			return
		}
	}
	c.close(fmt.Errorf("%w: %v", ErrClosed, sc.Err()))
}

func (c *Control) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// Run sends one command line (build arguments with Quote) and returns the
// lines of its reply, or its error.
func (c *Control) Run(ctx context.Context, cmd string) ([]string, error) {
	lines, _, err := c.RunMarked(ctx, cmd)
	return lines, err
}

// RunMarked is Run that also returns how many %output notifications came
// before the reply: onOutput had been given exactly those when the command
// ran, since tmux runs a command between two pieces of pane output. A
// capture of the pane holds what came before its mark and nothing after.
func (c *Control) RunMarked(ctx context.Context, cmd string) ([]string, uint64, error) {
	if strings.ContainsAny(cmd, "\n\r") {
		return nil, 0, fmt.Errorf("tmux command holds a line break: quote its arguments")
	}
	c.cmdMu.Lock()
	defer c.cmdMu.Unlock()
	if _, err := io.WriteString(c.w, cmd+"\n"); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	select {
	case rep := <-c.waiting:
		return rep.lines, rep.mark, rep.err
	case <-c.done:
		return nil, 0, c.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// Done is closed when the control client has gone.
func (c *Control) Done() <-chan struct{} { return c.done }

// Quote quotes one argument for tmux's command parser: double quotes, with
// every character the parser would interpret ($, ~, \, ", line breaks and
// other control characters) escaped, so the argument arrives byte for byte
// and a command line never breaks.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\\' || ch == '"' || ch == '$' || ch == '~':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch == '\n':
			b.WriteString(`\n`)
		case ch == '\r':
			b.WriteString(`\r`)
		case ch == '\t':
			b.WriteString(`\t`)
		case ch < 0x20 || ch == 0x7f:
			fmt.Fprintf(&b, `\%03o`, ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Command joins a command name and its quoted arguments.
func Command(name string, args ...string) string {
	parts := make([]string, 0, len(args)+1)
	parts = append(parts, name)
	for _, a := range args {
		parts = append(parts, Quote(a))
	}
	return strings.Join(parts, " ")
}

// Unescape decodes a %output payload: tmux writes bytes below 32 and the
// backslash as \ooo.
func Unescape(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return out
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// keysPerCommand bounds one send-keys -H: each byte is three characters of
// the command line.
const keysPerCommand = 512

// RawKeys returns the send-keys commands that write data to target's pane
// byte for byte (send-keys -H, tmux 3.0 and later), as if typed at a
// terminal: no key name lookup, and no byte, NUL included, is interpreted.
func RawKeys(target string, data []byte) []string {
	var out []string
	for len(data) > 0 {
		n := min(len(data), keysPerCommand)
		var b strings.Builder
		b.WriteString("send-keys -t " + Quote(target) + " -H")
		for _, c := range data[:n] {
			fmt.Fprintf(&b, " %02x", c)
		}
		out = append(out, b.String())
		data = data[n:]
	}
	return out
}
