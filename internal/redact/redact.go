// Package redact masks secrets in text the Hub stores or shows: by value,
// with a Set of a Session's Sensitive values, and by shape, with one registry
// of credential formats (Scrub) for text whose secrets nobody told the Hub.
//
// A Set holds a Session's values: its Repo's Sensitive Variables and linked
// Sensitive Shared variables, any value they replaced while the Session still
// runs with it, its Installations' header secret values, its current and
// previous Sandbox tokens and its Creator's setup token. It may change while
// streams run. Besides the value itself, a Set finds it trimmed, JSON-escaped,
// URL-encoded, as Markdown may print it (without some of the * _ ~ ` it
// holds) and, for a multi-line value such as a key, each of its long lines
// (LongLine characters or more). Matching skips terminal colour codes
// (any escape sequence, up to 256 skipped bytes in a row) and line breaks, so
// a value wrapped on screen is still found; the text of a window title or a
// hyperlink's URL is searched on its own. Claude's text and terminal output
// stream in pieces, so a Stream or Writer holds back the end of a piece that
// could start a value until the next one, for at most MaxHold (100 ms).
//
// Each character of a match becomes '*': one '*' per UTF-8 character, so an
// ASCII value keeps its length and a terminal its columns; escape codes and
// line breaks inside a match are kept. A masked character that cut short an
// unfinished escape code becomes CAN (0x18) and '*', since a '*' alone would
// extend the escape code and change how the text after it reads.
//
// Use Set.Redact for a whole text (an Event's prompt or tool output), a
// Writer for a stream relayed as it comes (terminal frames), and a Stream
// for pieces with a natural end (Claude's text as deltas of one message).
// Use Scrub on text whose secrets are not in any Set: log lines, error
// messages, audit text; ScrubMarked, and a Writer's MaskShapes, for the
// credentials with a mark of their own in a Session's Events and frames.
// What a shape masks says which rule masked it: [masked: slack-bot-token].
//
// Redaction has limits. It can't find a value transformed before it is
// printed (base64, hashed, split up by the program printing it), or one
// Claude Code's own screen wraps with indentation in the terminal; the
// transcript is still masked. What a script writes to disk, such as a token
// in an .npmrc, stays there. Scrub is a backstop: it knows shapes, not
// values, and leaves alone what has none (an AWS secret key outside a
// labelled field, a base64 blob), a placeholder (xxxx, abcdef, 123456),
// and a credential a terminal colours or breaks in the middle.
//
// Any package may import it; it depends on the standard library alone (and
// errdefs for its error class).
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"kndl.dev/kndl/internal/errdefs"
)

// MinLen is the fewest characters a Sensitive value may have, so it can be
// found reliably: escape sequences, line breaks and surrounding space don't
// count.
const MinLen = 4

// LongLine is the fewest characters a line of a multi-line value needs to be
// looked for on its own. PEM armour lines (-----BEGIN …-----) never are:
// they are the same in every key.
const LongLine = 16

// ErrTooShort is returned for a value shorter than MinLen.
var ErrTooShort = fmt.Errorf("%w: a sensitive value must be at least %d characters", errdefs.ErrInvalid, MinLen)

// Validate reports whether v can be a Sensitive value.
func Validate(v string) error {
	if utf8.RuneCountInString(strings.TrimSpace(content(v))) < MinLen {
		return ErrTooShort
	}
	return nil
}

// A Set is the values a Session's text is masked with. It is safe for
// concurrent use, and may change while Streams read with it: each call of a
// Stream uses the values as they are then. The zero Set is empty and ready.
type Set struct {
	mu    sync.Mutex
	refs  map[string]int
	forms map[string][]string // by value
	m     atomic.Pointer[matcher]
}

// NewSet returns a Set holding values, or an error if one is invalid.
func NewSet(values ...string) (*Set, error) {
	s := new(Set)
	if err := s.Add(values...); err != nil {
		return nil, err
	}
	return s, nil
}

// Add adds values to the Set. Each Add of a value needs its own Remove
// before the value stops being masked, so two holders of the same value
// (a Sensitive Variable and the value it replaced, say) can't unmask each
// other. If any value is invalid, Add adds none and says which, by position:
// an error never holds a value.
func (s *Set) Add(values ...string) error {
	for i, v := range values {
		if err := Validate(v); err != nil {
			return fmt.Errorf("sensitive value %d of %d: %w", i+1, len(values), err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == nil {
		s.refs, s.forms = map[string]int{}, map[string][]string{}
	}
	changed := false
	for _, v := range values {
		if s.refs[v] == 0 {
			s.forms[v] = forms(v)
			changed = true
		}
		s.refs[v]++
	}
	if changed {
		s.rebuild()
	}
	return nil
}

// Remove undoes one Add of each value. Values the Set doesn't hold are
// ignored.
func (s *Set) Remove(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		switch s.refs[v] {
		case 0:
		case 1:
			delete(s.refs, v)
			delete(s.forms, v)
			changed = true
		default:
			s.refs[v]--
		}
	}
	if changed {
		s.rebuild()
	}
}

// Len is the number of distinct values in the Set.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refs)
}

// Redact returns text with every value of the Set masked.
func (s *Set) Redact(text string) string {
	st := s.NewStream()
	out := st.Flush(st.Redact(make([]byte, 0, len(text)), []byte(text)))
	if !st.masked {
		return text
	}
	return string(out)
}

func (s *Set) rebuild() {
	seen := map[string]bool{}
	var patterns []string
	for _, v := range slices.Sorted(maps.Keys(s.forms)) {
		for _, f := range s.forms[v] {
			if !seen[f] {
				seen[f] = true
				patterns = append(patterns, f)
			}
		}
	}
	s.m.Store(newMatcher(patterns))
}

var emptyMatcher = newMatcher(nil)

func (s *Set) matcher() *matcher {
	if m := s.m.Load(); m != nil {
		return m
	}
	return emptyMatcher
}

// forms returns the patterns v is looked for as: the content bytes of v, v
// trimmed and each long line of v, each as it is, as Markdown may print it,
// JSON-escaped and URL-encoded.
func forms(v string) []string {
	bases := []string{v, strings.TrimSpace(v)}
	if strings.ContainsAny(v, "\r\n") {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\r' || r == '\n' }) {
			line = strings.TrimSpace(line)
			armour := strings.HasPrefix(line, "-----") && strings.HasSuffix(line, "-----")
			if utf8.RuneCountInString(content(line)) >= LongLine && !armour {
				bases = append(bases, line)
			}
		}
	}
	var out []string
	for _, b := range bases {
		out = append(out, rendered(b)...)
		j := jsonEscape(b, false)
		out = append(out,
			b,
			j,
			jsonEscape(j, false),             // JSON in a JSON string
			jsonEscape(b, true),              // \uXXXX for non-ASCII, as Python writes it
			goJSON(b),                        // Go's default, \u003c for <
			strings.ReplaceAll(j, "/", `\/`), // as PHP writes it
			url.QueryEscape(b),               // space as +
			strings.ReplaceAll(url.QueryEscape(b), "+", "%20"),
			url.PathEscape(b),
			uriComponent(b),                      // JavaScript's encodeURIComponent
			url.UserPassword("", b).String()[1:], // in a URL's userinfo
		)
	}
	seen := map[string]bool{}
	kept := out[:0]
	for _, f := range out {
		f = content(f)
		if len(f) >= MinLen && !seen[f] {
			seen[f] = true
			kept = append(kept, f)
		}
	}
	return kept
}

// markdownMarks are the characters Claude Code's Markdown may take for
// emphasis, strikethrough or a code span and not print: in its terminal a
// value that holds them can show without some of them, its text in italics
// or bold (escape codes, which matching reads through).
const markdownMarks = "*_~`"

// maxMarks is the most marks a value may hold for each way of dropping them
// to be looked for (2^6 - 1 forms); past it, only the value with all of them
// dropped is.
const maxMarks = 6

// rendered returns v as its Markdown may print it: with each subset of its
// marks dropped, or all of them past maxMarks; nothing when it has none.
func rendered(v string) []string {
	var at []int
	for i := 0; i < len(v); i++ {
		if strings.IndexByte(markdownMarks, v[i]) >= 0 {
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return nil
	}
	drop := func(set int) string {
		b := make([]byte, 0, len(v))
		k := 0
		for i := 0; i < len(v); i++ {
			if k < len(at) && at[k] == i {
				k++
				if set&(1<<(k-1)) != 0 {
					continue
				}
			}
			b = append(b, v[i])
		}
		return string(b)
	}
	if len(at) > maxMarks {
		return []string{drop(1<<len(at) - 1)}
	}
	out := make([]string, 0, 1<<len(at)-1)
	for set := 1; set < 1<<len(at); set++ {
		out = append(out, drop(set))
	}
	return out
}

// jsonEscape escapes s as the inside of a JSON string, with the short forms
// (\n, \t, …) for controls that have one and, if ascii is set, \uXXXX for
// every non-ASCII character.
func jsonEscape(s string, ascii bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (ascii && r > 0x7e):
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// goJSON is s as encoding/json writes it by default, without the quotes.
func goJSON(s string) string {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(s)
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(buf.String(), "\n"), `"`), `"`)
}

// uriComponent is JavaScript's encodeURIComponent: it keeps
// A-Z a-z 0-9 - _ . ! ~ * ' ( ) and percent-encodes every other byte.
func uriComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
