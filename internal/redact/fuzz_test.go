package redact

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// For random text with values planted in random forms, random colour codes
// and line breaks inside them, cut into random pieces:
//   - the streamed output is the one-shot output, wherever the cuts fall;
//   - the output holds no value in any form, in the text a terminal shows
//     (escape codes and line breaks read through) or in a string payload;
//   - text that holds no form of a value comes out unchanged.
//
// The oracle reads escape codes with its own reader and searches with
// bytes.Contains, so it shares no code with the automaton.
func FuzzStreamNeverEmitsAPlantedValue(f *testing.F) {
	f.Add([]byte("plain text with nothing in it"), uint64(1))
	f.Add([]byte("\x1b[31mred\x1b[0m\r\nnext line\x1b]0;title\x07 and \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), uint64(2))
	f.Add([]byte(`{"tool_output":"line\none\ttab \"quoted\""}`), uint64(3))
	f.Add([]byte("ümlaut ✓ 😀 \x1bP+q\x1b\\ \x1b(B"), uint64(4))
	f.Fuzz(func(t *testing.T, text []byte, seed uint64) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		values := make([]string, 1+r.IntN(3))
		for i := range values {
			values[i] = randomValue(r)
		}
		in := text
		for range r.IntN(4) {
			v := values[r.IntN(len(values))]
			at := r.IntN(len(in) + 1)
			in = slices.Concat(in[:at], []byte(plant(r, v)), in[at:])
		}
		s := mustSet(t, values...)

		want := s.Redact(string(in))
		var cuts []int
		for range r.IntN(6) {
			cuts = append(cuts, r.IntN(len(in)+1))
		}
		slices.Sort(cuts)
		if got := streamed(s, string(in), cuts...); got != want {
			t.Fatalf("streamed in pieces cut at %v:\ngot  %q\nwant %q\nvalues %q", cuts, got, want, values)
		}

		var patterns []string
		for _, v := range values {
			patterns = append(patterns, forms(v)...)
			patterns = append(patterns, listedForms(v)...)
		}
		if p, ok := holds(want, patterns); ok {
			t.Fatalf("output holds %q:\nin  %q\nout %q\nvalues %q", p, in, want, values)
		}
		if _, ok := holds(string(in), patterns); !ok && want != string(in) {
			t.Fatalf("text with no value changed:\nin  %q\nout %q\nvalues %q", in, want, values)
		}
	})
}

// randomValue returns a valid Sensitive value with no '*', sometimes with
// two long lines, like a key.
func randomValue(r *rand.Rand) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=@:%&<> \"\\'é€😀"
	runes := []rune(alphabet)
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		return b.String()
	}
	for {
		v := word(4 + r.IntN(20))
		if r.IntN(4) == 0 {
			v = word(LongLine+r.IntN(8)) + "\n" + word(LongLine+r.IntN(8))
		}
		if Validate(v) == nil {
			return v
		}
	}
}

// listedForms are the forms the spec lists, made here with the standard
// library: the value, trimmed, JSON-escaped, URL-encoded (+ and %20), and
// each long line.
func listedForms(v string) []string {
	js := func(s string) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		e.Encode(s)
		return strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(b.String(), `"`), "\n"), `"`)
	}
	bases := []string{v, strings.TrimSpace(v)}
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); len([]rune(line)) >= LongLine {
			bases = append(bases, line)
		}
	}
	var out []string
	for _, b := range bases {
		out = append(out, b, js(b), url.QueryEscape(b), strings.ReplaceAll(url.QueryEscape(b), "+", "%20"))
	}
	return out
}

// plant returns v in a random listed form, sometimes with a colour code, a
// line break or a window title inside it, or inside a hyperlink's URL.
func plant(r *rand.Rand, v string) string {
	fs := listedForms(v)
	p := fs[r.IntN(len(fs))]
	if len(p) > 1 && r.IntN(2) == 0 {
		at := 1 + r.IntN(len(p)-1)
		gaps := []string{"\x1b[31m", "\x1b[0m", "\x1b[38;5;196m", "\r\n", "\n", "\r", "\x1b[K\r\n", "\x1b]0;t\x07", "\x1b(B"}
		p = p[:at] + gaps[r.IntN(len(gaps))] + p[at:]
	}
	if r.IntN(5) == 0 {
		p = "\x1b]8;;https://h/?q=" + p + "\x1b\\"
	}
	return p
}

// holds reports a pattern found in text as a terminal would show it, or in
// one of its string payloads.
func holds(text string, patterns []string) (string, bool) {
	vs := views([]byte(text))
	for _, p := range patterns {
		p := oracleContent(p)
		if len(p) < MinLen {
			continue
		}
		for _, v := range vs {
			if bytes.Contains(v, []byte(p)) {
				return p, true
			}
		}
	}
	return "", false
}

type oracleKind uint8

const (
	oContent oracleKind = iota
	oSkip
	oPayload
)

// oracleKinds sorts the bytes of b as ECMA-48 reads them (see escState),
// written as a recursive reader rather than a state machine.
func oracleKinds(b []byte) []oracleKind {
	k := make([]oracleKind, len(b))
	for i := 0; i < len(b); {
		switch b[i] {
		case '\r', '\n':
			k[i] = oSkip
			i++
		case 0x1b:
			i = oracleEscape(b, i, k)
		default:
			k[i] = oContent
			i++
		}
	}
	return k
}

// oracleEscape reads the sequence whose ESC is b[i] and returns where the
// next one starts.
func oracleEscape(b []byte, i int, k []oracleKind) int {
	k[i] = oSkip
	i++
	for i < len(b) && b[i] == 0x1b {
		k[i] = oSkip
		i++
	}
	if i == len(b) {
		return i
	}
	run := func(lo, hi byte) {
		for i < len(b) && lo <= b[i] && b[i] <= hi {
			k[i] = oSkip
			i++
		}
	}
	switch c := b[i]; {
	case c == '[':
		k[i] = oSkip
		i++
		run(0x20, 0x3f)
		if i < len(b) && 0x40 <= b[i] && b[i] <= 0x7e {
			k[i] = oSkip
			i++
		}
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		k[i] = oSkip
		for i++; i < len(b); i++ {
			switch {
			case b[i] == 0x07 && c == ']':
				k[i] = oSkip
				return i + 1
			case b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\':
				k[i], k[i+1] = oSkip, oSkip
				return i + 2
			case b[i] == 0x1b:
				return oracleEscape(b, i, k)
			}
			k[i] = oPayload
		}
	case 0x20 <= c && c <= 0x2f:
		run(0x20, 0x2f)
		if i < len(b) && 0x30 <= b[i] && b[i] <= 0x7e {
			k[i] = oSkip
			i++
		}
	case 0x30 <= c && c <= 0x7e:
		k[i] = oSkip
		i++
	}
	return i
}

// views returns what is matched against: the content bytes, cut where more
// than maxSkip bytes are skipped in a row, and each payload, cut at line
// breaks.
func views(b []byte) [][]byte {
	k := oracleKinds(b)
	var out [][]byte
	var content, payload []byte
	skipped := 0
	for i, c := range b {
		if k[i] == oContent {
			if skipped > maxSkip {
				out, content = append(out, content), nil
			}
			skipped = 0
			content = append(content, c)
		} else {
			skipped++
		}
		if k[i] == oPayload && c != '\r' && c != '\n' {
			payload = append(payload, c)
		} else if payload != nil {
			out, payload = append(out, payload), nil
		}
	}
	return append(out, content, payload)
}

func oracleContent(s string) string {
	k := oracleKinds([]byte(s))
	var out []byte
	for i := range len(s) {
		if k[i] == oContent {
			out = append(out, s[i])
		}
	}
	return string(out)
}
