package testenv

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// diffWindow is how many bytes of each side Diff shows either side of
// where they part.
const diffWindow = 60

// Diff says where two long texts part, for a failure message: both lengths,
// the first byte offset (and line) where they differ, a window of each
// side around it, and how long their common ends are, which tells an
// insertion or a deletion (the ends add up to the shorter) from a change.
// It returns "" when they are the same.
func Diff(got, want string) string {
	if got == want {
		return ""
	}
	p := 0
	for p < len(got) && p < len(want) && got[p] == want[p] {
		p++
	}
	q := 0
	for q < len(got)-p && q < len(want)-p && got[len(got)-1-q] == want[len(want)-1-q] {
		q++
	}
	return fmt.Sprintf("got %d bytes, want %d; they first differ at byte %d (line %d), and agree again for the last %d bytes of each:\n got  …%q…\n want …%q…",
		len(got), len(want), p, strings.Count(want[:p], "\n")+1, q, window(got, p), window(want, p))
}

// window is s around byte p, cut at characters' starts.
func window(s string, p int) string {
	from, to := max(0, p-diffWindow), min(len(s), p+diffWindow)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	return s[from:to]
}
