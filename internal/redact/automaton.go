package redact

import "slices"

// A matcher is an Aho-Corasick automaton over the patterns of a Set: the
// content bytes (see escState) of every form of every value. It is immutable
// once built and shared by every Stream of its Set.
//
// States are named by ids. The states at most denseDepth bytes deep are
// "dense": their id is their row's offset in a full transition table, so a
// step is one load. Deeper states, which ordinary text rarely reaches, keep
// only their trie edges and a failure link, so the table's size follows the
// number of distinct short prefixes rather than the number of pattern bytes
// (a 3 KiB private key adds about 8,000 deep states of 16 bytes each, not
// 8,000 rows of 256 bytes).
type matcher struct {
	cls     [256]uint8 // byte -> class; 0 is "in no pattern"
	ncls    uint32
	special uint8 // the class of ESC, CR and LF, which no pattern holds

	dense  []uint32 // rows of ncls entries: next id | flags
	denseN uint32   // len(dense); ids below it are dense
	dDepth []int32  // by dense index (id/ncls)
	dOut   []int32  // length of the longest pattern ending at the state, 0 if none

	deep  []deepState // by id-denseN
	edges []edge

	// starts has a bit for each byte pair that begins a pattern or holds
	// ESC, CR or LF: at the root, text between such pairs can be passed
	// over without stepping the automaton.
	starts [1 << 16 / 64]uint64

	npat int
}

type deepState struct {
	fail   uint32
	depth  int32
	out    int32
	lo, hi uint32 // edges[lo:hi]
}

type edge struct {
	cls uint8
	to  uint32 // a transition, with flags
}

// A transition is the next state's id with flags in its top bits, so the
// common case, a dense state to a dense state with no match, is one compare.
const (
	// matchFlag marks a transition into a state where a pattern ends.
	matchFlag = 1 << 31
	// specialFlag marks the transition on ESC, CR or LF, which leaves the
	// state as it is and hands the byte to the escape scanner.
	specialFlag = 1 << 30
	// deepFlag marks a transition into a deep state.
	deepFlag = 1 << 29
	idMask   = deepFlag - 1
	// denseDepth: states up to this depth get a full row.
	denseDepth = 3
)

// newMatcher builds the automaton for patterns, which hold no ESC, CR or LF.
func newMatcher(patterns []string) *matcher { return newMatcherDense(patterns, denseDepth, false) }

// newMatcherDense is newMatcher with a full row for every state up to dense
// bytes deep: the registry's short words fit whole in the table. With
// fold, patterns are lower-case and an upper-case letter of the text reads
// as its lower case.
func newMatcherDense(patterns []string, dense int32, fold bool) *matcher {
	m := &matcher{npat: len(patterns)}

	// Classes: one per byte used by some pattern, 0 for the rest, and one
	// more for the bytes the escape scanner must see.
	var used [256]bool
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			used[p[i]] = true
		}
	}
	n := uint8(1)
	for b := range 256 {
		if used[b] {
			m.cls[b] = n
			n++
		}
	}
	m.special = n
	m.ncls = uint32(n) + 1
	for _, b := range []byte{0x1b, '\r', '\n'} {
		m.cls[b] = m.special
		for c := range 256 {
			m.setStart(b, byte(c))
			m.setStart(byte(c), b)
		}
	}
	for _, p := range patterns {
		m.setStart(p[0], p[1]) // patterns have at least MinLen bytes
	}
	if fold {
		for b := byte('A'); b <= 'Z'; b++ {
			m.cls[b] = m.cls[b+'a'-'A']
		}
		for _, p := range patterns {
			for _, a := range []byte{p[0], upper(p[0])} {
				for _, b := range []byte{p[1], upper(p[1])} {
					m.setStart(a, b)
				}
			}
		}
	}

	// The trie, by class.
	type node struct {
		next  []edge // to: node index, sorted by cls
		fail  int
		depth int32
		out   int32
	}
	nodes := []node{{}}
	for _, p := range patterns {
		cur := 0
		for i := 0; i < len(p); i++ {
			c := m.cls[p[i]]
			j, ok := slices.BinarySearchFunc(nodes[cur].next, c, func(e edge, c uint8) int { return int(e.cls) - int(c) })
			if ok {
				cur = int(nodes[cur].next[j].to)
				continue
			}
			nodes = append(nodes, node{depth: nodes[cur].depth + 1})
			nodes[cur].next = slices.Insert(nodes[cur].next, j, edge{c, uint32(len(nodes) - 1)})
			cur = len(nodes) - 1
		}
		nodes[cur].out = nodes[cur].depth
	}

	// Breadth-first order: failure links point to shallower states, and
	// the dense states (depth <= denseDepth) come first.
	order := []int{0}
	for k := 0; k < len(order); k++ {
		u := order[k]
		for _, e := range nodes[u].next {
			v := int(e.to)
			if u != 0 {
				f := nodes[u].fail
				for {
					j, ok := slices.BinarySearchFunc(nodes[f].next, e.cls, func(e edge, c uint8) int { return int(e.cls) - int(c) })
					if ok {
						nodes[v].fail = int(nodes[f].next[j].to)
						break
					}
					if f == 0 {
						break
					}
					f = nodes[f].fail
				}
			}
			if nodes[v].out == 0 {
				nodes[v].out = nodes[nodes[v].fail].out
			}
			order = append(order, v)
		}
	}
	nDense := 0
	for nDense < len(order) && nodes[order[nDense]].depth <= dense {
		nDense++
	}
	m.denseN = uint32(nDense) * m.ncls
	rank := make([]int, len(nodes)) // node index -> position in order
	for k, u := range order {
		rank[u] = k
	}
	id := func(u int) uint32 {
		if k := rank[u]; k < nDense {
			return uint32(k) * m.ncls
		} else {
			return m.denseN + uint32(k-nDense)
		}
	}
	withFlag := func(u int) uint32 {
		t := id(u)
		if nodes[u].out > 0 {
			t |= matchFlag
		}
		if rank[u] >= nDense {
			t |= deepFlag
		}
		return t
	}

	m.dense = make([]uint32, m.denseN)
	m.dDepth = make([]int32, nDense)
	m.dOut = make([]int32, nDense)
	for k := range nDense {
		u := order[k]
		row := m.dense[uint32(k)*m.ncls : uint32(k+1)*m.ncls]
		if u != 0 {
			// Start from the failure state's row, which is shallower and
			// so already filled.
			copy(row, m.dense[id(nodes[u].fail):id(nodes[u].fail)+m.ncls])
		}
		for _, e := range nodes[u].next {
			row[e.cls] = withFlag(int(e.to))
		}
		row[m.special] = uint32(k)*m.ncls | specialFlag
		m.dDepth[k] = nodes[u].depth
		m.dOut[k] = nodes[u].out
	}
	for k := nDense; k < len(order); k++ {
		u := order[k]
		d := deepState{fail: id(nodes[u].fail), depth: nodes[u].depth, out: nodes[u].out, lo: uint32(len(m.edges))}
		for _, e := range nodes[u].next {
			m.edges = append(m.edges, edge{e.cls, withFlag(int(e.to))})
		}
		d.hi = uint32(len(m.edges))
		m.deep = append(m.deep, d)
	}
	return m
}

// skipRoot passes over p[i:] from the root state: over bytes whose pair
// with the next can't begin a pattern. It returns where to go on and the
// state there, which is where the last byte passed over alone leads: a
// longer suffix that began a pattern would begin with such a pair.
func skipRoot[T []byte | string](m *matcher, p T, i int) (int, uint32) {
	j := i + 1
	for prev := p[i]; j < len(p); j++ {
		c := p[j]
		x := uint16(prev)<<8 | uint16(c)
		if m.starts[x>>6]&(1<<(x&63)) != 0 {
			break
		}
		prev = c
	}
	// p[j] is the first byte of a pair that can begin a pattern, or the
	// last byte.
	if j--; j > i {
		return j, m.dense[m.cls[p[j-1]]]
	}
	return i, 0
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func (m *matcher) setStart(a, b byte) {
	x := uint32(a)<<8 | uint32(b)
	m.starts[x>>6] |= 1 << (x & 63)
}

// step returns the transition from state id on class c: the next id with
// its flags, or id|specialFlag for ESC, CR and LF.
func (m *matcher) step(id uint32, c uint8) uint32 {
	if id < m.denseN {
		return m.dense[id+uint32(c)]
	}
	return m.stepDeep(id, c)
}

func (m *matcher) stepDeep(id uint32, c uint8) uint32 {
	if c == m.special {
		return id | specialFlag
	}
	for {
		d := &m.deep[id-m.denseN]
		for _, e := range m.edges[d.lo:d.hi] {
			if e.cls == c {
				return e.to
			}
		}
		id = d.fail
		if id < m.denseN {
			return m.dense[id+uint32(c)]
		}
	}
}

// depth is the number of content bytes of a pattern prefix state id stands for.
func (m *matcher) depth(id uint32) int64 {
	if id < m.denseN {
		return int64(m.dDepth[id/m.ncls])
	}
	return int64(m.deep[id-m.denseN].depth)
}

// out is the length of the longest pattern ending at state id.
func (m *matcher) out(id uint32) int64 {
	if id < m.denseN {
		return int64(m.dOut[id/m.ncls])
	}
	return int64(m.deep[id-m.denseN].out)
}
