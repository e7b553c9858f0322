package gitrelay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// What the relay reads of a push: the receive-pack commands at the head of
// its body, in git's pkt-lines (gitprotocol-common(5)), and nothing after
// them. Each read is bounded, so a Sandbox can make the relay hold at most
// maxCommandLine bytes for one line and maxCommands lines for one push.

// Caps on what one push's commands may be. A command is
// "<old> <new> <ref>", the first with git's capabilities after a NUL: 2
// object ids of at most 64 hex digits, a branch name and the capability
// list git 2.39 sends (about 150 bytes) fit in far less than 4 KiB. A
// push of more than 256 refs at once is no Session's work.
const (
	maxCommandLine = 4 << 10
	maxCommands    = 256
	maxShallow     = 1024 // "shallow <oid>" lines a shallow clone sends first
)

// Update is one ref a push asks to change: its old and new object ids
// (all zeros for none) and its full name, refs/heads/….
type Update struct {
	Old, New, Ref string
}

// Create reports whether the update makes a new ref.
func (u Update) Create() bool { return zeroID(u.Old) }

// Delete reports whether the update deletes the ref.
func (u Update) Delete() bool { return zeroID(u.New) }

// Branch is the ref's branch name, "" for a ref outside refs/heads/.
func (u Update) Branch() string {
	b, ok := strings.CutPrefix(u.Ref, "refs/heads/")
	if !ok {
		return ""
	}
	return b
}

func zeroID(id string) bool { return strings.Trim(id, "0") == "" }

// commands is what readCommands found: the updates, the capabilities the
// client asked for, and the bytes it read, to send on before the rest of
// the body.
type commands struct {
	updates []Update
	caps    []string
	head    []byte
}

// errMalformed is a push body that is not receive-pack commands within
// the caps.
var errMalformed = errors.New("malformed push")

// readCommands reads a receive-pack request's commands, up to and with the
// flush after them, and no further: what follows (push options, the pack)
// is the client's to stream through unread.
func readCommands(body io.Reader) (commands, error) {
	var head bytes.Buffer
	r := io.TeeReader(body, &head)
	var c commands
	shallow := 0
	for {
		line, flush, err := readPkt(r, maxCommandLine)
		if err != nil {
			return c, err
		}
		if flush {
			break
		}
		if rest, ok := strings.CutPrefix(line, "shallow "); ok && len(c.updates) == 0 {
			if shallow++; shallow > maxShallow || !validID(strings.TrimSuffix(rest, "\n")) {
				return c, fmt.Errorf("%w: more than %d shallow lines, or a bad one", errMalformed, maxShallow)
			}
			continue
		}
		if len(c.updates) == maxCommands {
			return c, fmt.Errorf("%w: more than %d refs in one push", errMalformed, maxCommands)
		}
		line = strings.TrimSuffix(line, "\n")
		if len(c.updates) == 0 {
			var caps string
			line, caps, _ = strings.Cut(line, "\x00")
			c.caps = strings.Fields(caps)
		} else if strings.ContainsRune(line, 0) {
			return c, fmt.Errorf("%w: capabilities after the first command", errMalformed)
		}
		u, err := parseCommand(line)
		if err != nil {
			return c, err
		}
		c.updates = append(c.updates, u)
	}
	if len(c.updates) == 0 {
		return c, fmt.Errorf("%w: no commands", errMalformed)
	}
	c.head = head.Bytes()
	return c, nil
}

// parseCommand parses "<old> <new> <ref>".
func parseCommand(line string) (Update, error) {
	f := strings.Split(line, " ")
	if len(f) != 3 || !validID(f[0]) || !validID(f[1]) || len(f[0]) != len(f[1]) || !validRef(f[2]) {
		return Update{}, fmt.Errorf("%w: a command is not \"<old> <new> <ref>\": %.100q", errMalformed, line)
	}
	return Update{Old: f[0], New: f[1], Ref: f[2]}, nil
}

// validID is a SHA-1 or SHA-256 object id in lower-case hex.
func validID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validRef is a ref name git would take (git-check-ref-format(1)), more
// strictly: printable ASCII without git's special characters, no empty,
// dot-led or .lock component, no "..", "@{" or trailing dot.
func validRef(s string) bool {
	if !strings.HasPrefix(s, "refs/") || len(s) > 1024 || strings.Contains(s, "..") || strings.Contains(s, "@{") || strings.HasSuffix(s, ".") {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`~^:?*[\`, c) {
			return false
		}
	}
	for _, comp := range strings.Split(s, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// readPkt reads one pkt-line of at most max bytes of payload: its payload,
// or flush for a flush-pkt. A delim or response-end pkt (protocol v2) has
// no place in a push, and is malformed.
func readPkt(r io.Reader, max int) (payload string, flush bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", false, fmt.Errorf("%w: cut short: %v", errMalformed, err)
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return "", false, fmt.Errorf("%w: a pkt-line length is not 4 hex digits: %q", errMalformed, hdr[:])
	}
	switch {
	case n == 0:
		return "", true, nil
	case n < 4:
		return "", false, fmt.Errorf("%w: a special pkt-line %04x in a push's commands", errMalformed, n)
	case int(n)-4 > max:
		return "", false, fmt.Errorf("%w: a pkt-line of %d bytes; a command is at most %d", errMalformed, n-4, max)
	}
	b := make([]byte, n-4)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", false, fmt.Errorf("%w: cut short: %v", errMalformed, err)
	}
	return string(b), false, nil
}

// pkt encodes payload as a pkt-line.
func pkt(payload string) []byte {
	return fmt.Appendf(nil, "%04x%s", len(payload)+4, payload)
}

// flushPkt ends a section of pkt-lines.
var flushPkt = []byte("0000")

// reportReader passes a receive-pack answer through unchanged, and notes
// the refs its report-status says the forge took ("ok <ref>"), inside
// side band 1 when the client asked for a side band. What it reads comes
// from the forge, not the Sandbox; it holds at most one pkt-line all the
// same, and stops looking (passing the rest through) at anything that is
// not one.
type reportReader struct {
	r        io.Reader
	sideband bool
	buf      []byte // answer bytes not yet parsed
	inner    []byte // side band 1's bytes not yet parsed
	ok       []string
	broken   bool
}

// maxReportBuf bounds what reportReader holds unparsed: one pkt-line.
const maxReportBuf = 65520 + 4

func (p *reportReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 && !p.broken {
		p.buf = append(p.buf, b[:n]...)
		p.parse()
	}
	return n, err
}

func (p *reportReader) parse() {
	for !p.broken {
		payload, rest, st := cutPkt(p.buf)
		if st != pktWhole {
			p.broken = st == pktBad || len(p.buf) > maxReportBuf
			return
		}
		p.buf = rest
		if !p.sideband {
			p.line(payload)
			continue
		}
		if len(payload) == 0 || payload[0] != 1 {
			continue // progress, errors, flush
		}
		p.inner = append(p.inner, payload[1:]...)
		for {
			line, rest, st := cutPkt(p.inner)
			if st != pktWhole {
				p.broken = st == pktBad || len(p.inner) > maxReportBuf
				break
			}
			p.inner = rest
			p.line(line)
		}
	}
}

func (p *reportReader) line(payload []byte) {
	if ref, ok := strings.CutPrefix(strings.TrimSuffix(string(payload), "\n"), "ok "); ok {
		p.ok = append(p.ok, ref)
	}
}

// What cutPkt found at the start of its bytes.
const (
	pktWhole   = iota // a whole pkt-line
	pktPartial        // the start of one
	pktBad            // something that is not one
)

// cutPkt splits the first pkt-line off b: its payload (nil for a special
// one) and the rest.
func cutPkt(b []byte) (payload, rest []byte, state int) {
	if len(b) < 4 {
		return nil, b, pktPartial
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	switch {
	case err != nil:
		return nil, b, pktBad
	case n < 4:
		return nil, b[4:], pktWhole
	case len(b) < int(n):
		return nil, b, pktPartial
	}
	return b[4:n], b[n:], pktWhole
}
