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
	mu      sync.Mutex
	waiting chan reply // the reply the current command waits for
	done    chan struct{}
	err     error
}

type reply struct {
	lines []string
	err   error
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
			rep := reply{lines: block}
			if strings.HasPrefix(line, "%error ") {
				rep.err = errors.New(strings.Join(block, "; "))
			}
			c.waiting <- rep
		case in:
			block = append(block, line)
		case strings.HasPrefix(line, "%output "):
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
	if strings.ContainsAny(cmd, "\n\r") {
		return nil, fmt.Errorf("tmux command holds a line break: quote its arguments")
	}
	c.cmdMu.Lock()
	defer c.cmdMu.Unlock()
	if _, err := io.WriteString(c.w, cmd+"\n"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	select {
	case rep := <-c.waiting:
		return rep.lines, rep.err
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
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
