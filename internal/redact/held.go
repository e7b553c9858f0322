package redact

import (
	"fmt"
	"slices"
	"strings"
)

// heldStrings finds in one pass which of an allowlist's needed strings a
// target holds, in any case: an automaton over them, each state with the
// strings that end there. generic-api-key's allowlist has 36 branches, and
// a target, the whole match, holds a token's random bytes, whose byte pairs
// let most branches through to a substring search each; one walk over the
// target costs less than those searches.
type heldStrings struct {
	m    *matcher
	ends [][]uint16 // by dense state index: the strings ending there
}

// maxHeld is the most strings a heldStrings reads, the bits of a heldSet.
const maxHeld = 8 * 64

// A heldSet has a bit for each string of a heldStrings a target holds.
type heldSet [maxHeld / 64]uint64

// newHeldStrings returns the automaton over words, lower-case, each of two
// bytes or more and none with ESC, CR or LF; a word's id is its index.
func newHeldStrings(words []string) *heldStrings {
	if len(words) > maxHeld {
		panic(fmt.Sprintf("redact: an allowlist needs %d strings, above the %d a heldSet holds", len(words), maxHeld))
	}
	longest := 0
	for _, w := range words {
		longest = max(longest, len(w))
	}
	h := &heldStrings{m: newMatcherDense(words, int32(longest), true)}
	names := h.m.stateNames()
	h.ends = make([][]uint16, len(names))
	for k, name := range names {
		for id, w := range words {
			if strings.HasSuffix(name, w) {
				h.ends[k] = append(h.ends[k], uint16(id))
			}
		}
	}
	return h
}

// read sets in s the strings target, ASCII, holds.
func (h *heldStrings) read(target string, s *heldSet) {
	m := h.m
	var st uint32
	for i := 0; i < len(target); i++ {
		t := m.dense[st+uint32(m.cls[target[i]])]
		if t&specialFlag != 0 {
			st = 0 // no string holds ESC, CR or LF
			continue
		}
		st = t & idMask
		if t&matchFlag != 0 {
			for _, id := range h.ends[st/m.ncls] {
				s[id/64] |= 1 << (id % 64)
			}
		}
	}
}

// heldIDs gives each of needs' strings, lower-case, an id in words,
// adding it if new: by need, by string, or a nil need for one with a string
// the automaton can't read (a single byte, or one holding ESC, CR or LF),
// which any target may hold.
func heldIDs(needs []literals, words *[]string) [][]uint16 {
	var out [][]uint16
	for _, l := range needs {
		var ids []uint16
		for _, a := range l.alts {
			a = strings.ToLower(a)
			if len(a) < 2 || strings.ContainsAny(a, "\x1b\r\n") {
				ids = nil
				break
			}
			k := slices.Index(*words, a)
			if k < 0 {
				k = len(*words)
				*words = append(*words, a)
			}
			ids = append(ids, uint16(k))
		}
		out = append(out, ids)
	}
	return out
}

// mayHoldEach reports whether a target whose held strings are s may hold
// each of needs, given as heldIDs gives them.
func (s *heldSet) mayHoldEach(needs [][]uint16) bool {
	for _, ids := range needs {
		if ids == nil {
			continue
		}
		if !slices.ContainsFunc(ids, func(id uint16) bool { return s[id/64]&(1<<(id%64)) != 0 }) {
			return false
		}
	}
	return true
}

// stateNames is the string each dense state stands for, lower-case, down
// the trie's edges (a step one byte deeper), by dense index.
func (m *matcher) stateNames() []string {
	var rep [256]byte // a byte of each class, as the words spell it
	for b := 255; b >= 0; b-- {
		if c := m.cls[b]; c != 0 && c != m.special && !('A' <= b && b <= 'Z') {
			rep[c] = byte(b)
		}
	}
	n := len(m.dDepth)
	name := make([]string, n)
	for k := range n { // breadth-first order: a parent comes before its children
		for c := uint32(1); c < m.ncls; c++ {
			if c == uint32(m.special) {
				continue
			}
			to := (m.dense[uint32(k)*m.ncls+c] & idMask) / m.ncls
			if m.dDepth[to] == m.dDepth[k]+1 {
				name[to] = name[k] + string(rep[c])
			}
		}
	}
	return name
}
