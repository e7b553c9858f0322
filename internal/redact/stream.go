package redact

import "slices"

// maxSkip is the longest run of skipped bytes (escape sequences, string
// payloads, line breaks) that matching reads through. A value wrapped on
// screen or coloured mid-way is interrupted by a few bytes; a longer run ends
// any partial match, which also bounds what a Stream holds back.
const maxSkip = 256

// A Stream redacts one stream that arrives in pieces, such as a terminal's
// output or Claude's text, with the values of its Set. It finds a value split
// across pieces: the end of a piece that could begin a value is held back,
// and only that end; everything before it is released at once.
//
// A Stream keeps no clock: Flush releases what is held. Writer adds the
// deadline (MaxHold) and locking; use a Stream directly where pieces have a
// natural end, such as one message built from deltas.
//
// A Stream is not safe for concurrent use. Values added to or removed from
// its Set apply from the next call, to the held bytes too.
type Stream struct {
	set *Set
	m   *matcher

	st  uint32   // automaton state over content bytes
	st2 uint32   // automaton state over the current string payload
	esc escState // at pos

	pos  int64 // bytes read
	out  int64 // bytes released; held holds [out, pos)
	held []byte
	// heldEsc is the escape state at out, from which held is read again
	// when the Set changes.
	heldEsc escState

	skips []span // runs of skipped bytes inside the current partial match
	masks []span // bytes to mask, sorted and disjoint, all ending after out
	// aborts are the content bytes at or after out that ended an
	// unfinished escape sequence (ESC [ 3 8 é): masked, they become CAN *,
	// since a lone * would continue the sequence and change how the
	// output after it reads.
	aborts []int64

	masked bool // some byte was masked
}

type span struct{ start, end int64 }

// NewStream returns a Stream that redacts with s's values as they are at
// each call.
func (s *Set) NewStream() *Stream {
	return &Stream{set: s, m: s.matcher()}
}

// Redact reads p, appends to dst what can be released, and returns dst.
// What it holds back, at most the start of the longest value, comes out of a
// later call or Flush.
func (s *Stream) Redact(dst, p []byte) []byte {
	if m := s.set.matcher(); m != s.m {
		dst = s.rescan(dst, m)
	}
	// Where pieces are cut doesn't change the output, so a large piece is
	// read in slices, which bounds the masks kept for one.
	for len(p) > 0 {
		q := p[:min(len(p), 64<<10)]
		p = p[len(q):]
		base := s.pos
		s.scan(q)
		dst = s.release(dst, q, base, s.safe())
	}
	return dst
}

// Flush appends what is held back to dst, redacted, and returns dst. A value
// whose start was held and whose rest comes later is not found.
func (s *Stream) Flush(dst []byte) []byte {
	if m := s.set.matcher(); m != s.m {
		dst = s.rescan(dst, m)
	}
	dst = s.release(dst, nil, s.pos, s.pos)
	s.st, s.st2 = 0, 0
	s.skips = s.skips[:0]
	return dst
}

// Held is the number of bytes held back.
func (s *Stream) Held() int { return int(s.pos - s.out) }

// scan runs the automaton over p, recording the spans to mask.
func (s *Stream) scan(p []byte) {
	m := s.m
	dense, cls, denseN := m.dense, &m.cls, m.denseN
	base := s.pos
	i := 0
	if s.esc != ground {
		i = s.skip(p, 0, base)
	}
	st := s.st
	for i < len(p) {
		if st == 0 {
			i, st = skipRoot(m, p, i)
		}
		var t uint32
		if st < denseN {
			t = dense[st+uint32(cls[p[i]])]
			if t < deepFlag {
				// The common case: a dense state, no match.
				st = t
				i++
				continue
			}
		} else {
			t = m.stepDeep(st, cls[p[i]])
		}
		if t&specialFlag != 0 {
			s.st = st
			i = s.skip(p, i, base)
			st = s.st
			continue
		}
		st = t & idMask
		i++
		if t&matchFlag != 0 {
			s.st = st
			s.matched(base + int64(i))
		}
	}
	s.st = st
	s.pos = base + int64(len(p))
}

// skip reads escape sequences, payloads and line breaks from p[i:] up to the
// next content byte, and returns its index.
func (s *Stream) skip(p []byte, i int, base int64) int {
	run := i
	// Line breaks and whole CSI sequences, the usual, in a tight loop.
	for s.esc == ground && i < len(p) {
		switch p[i] {
		case '\r', '\n':
			i++
			continue
		case 0x1b:
			if j := i + 2; j < len(p) && p[i+1] == '[' {
				for j < len(p) && 0x20 <= p[j] && p[j] <= 0x3f {
					j++
				}
				if j < len(p) && 0x40 <= p[j] && p[j] <= 0x7e {
					i = j + 1
					continue
				}
			}
		default:
			s.skipped(base+int64(run), base+int64(i))
			return i
		}
		break
	}
	for ; i < len(p); i++ {
		b := p[i]
		was := s.esc
		k := s.esc.step(b)
		if was.inString() != s.esc.inString() {
			s.st2 = 0
		}
		switch k {
		case kContent:
			if was != ground {
				s.aborts = append(s.aborts, base+int64(i))
			}
			s.skipped(base+int64(run), base+int64(i))
			return i
		case kPayload:
			s.payload(b, base+int64(i))
		}
	}
	s.skipped(base+int64(run), base+int64(len(p)))
	return len(p)
}

// skipped records that [a, b) was skipped. Only a run inside a partial
// match matters, to find where the match began.
func (s *Stream) skipped(a, b int64) {
	if a >= b || s.st == 0 {
		return
	}
	n := len(s.skips)
	if n > 0 && s.skips[n-1].end == a {
		s.skips[n-1].end = b
	} else {
		s.skips = append(s.skips, span{a, b})
		n++
	}
	if r := s.skips[n-1]; r.end-r.start > maxSkip {
		s.st = 0
		s.skips = s.skips[:0]
		return
	}
	if n > 64 {
		s.pruneSkips(s.back(s.m.depth(s.st), b, false))
	}
}

func (s *Stream) pruneSkips(from int64) {
	k := 0
	for k < len(s.skips) && s.skips[k].end <= from {
		k++
	}
	s.skips = slices.Delete(s.skips, 0, k)
}

// payload runs the payload automaton over b, a payload byte at abs. A
// payload holds no skipped bytes, so a match is one span.
func (s *Stream) payload(b byte, abs int64) {
	if b == '\r' || b == '\n' {
		s.st2 = 0
		return
	}
	t := s.m.step(s.st2, s.m.cls[b])
	s.st2 = t & idMask
	if t&matchFlag != 0 {
		s.addMask(abs+1-s.m.out(s.st2), abs+1)
	}
}

// matched masks the longest pattern ending at content byte end-1. The
// shorter ones ending there are inside it.
func (s *Stream) matched(end int64) {
	s.back(s.m.out(s.st), end, true)
}

// back finds the n-th content byte before end, walking back over the
// skipped runs, and masks the content bytes on the way if mask is set.
func (s *Stream) back(n, end int64, mask bool) int64 {
	cur := end
	for k := len(s.skips) - 1; k >= 0; k-- {
		r := s.skips[k]
		if r.end > cur {
			continue
		}
		if cur-r.end >= n {
			break
		}
		if mask {
			s.addMask(r.end, cur)
		}
		n -= cur - r.end
		cur = r.start
	}
	if mask {
		s.addMask(cur-n, cur)
	}
	return cur - n
}

// addMask adds [a, b) to the sorted, disjoint masks, merging what it meets.
func (s *Stream) addMask(a, b int64) {
	if a >= b {
		return
	}
	i := len(s.masks)
	for i > 0 && s.masks[i-1].end >= a {
		i--
	}
	j := i
	for j < len(s.masks) && s.masks[j].start <= b {
		a = min(a, s.masks[j].start)
		b = max(b, s.masks[j].end)
		j++
	}
	s.masks = slices.Replace(s.masks, i, j, span{a, b})
}

// safe returns how far output can go: up to the first byte of the longest
// tail that could still grow into a value, in content or in a payload.
func (s *Stream) safe() int64 {
	f, e := s.pos, s.esc
	if s.st != 0 {
		f, e = s.back(s.m.depth(s.st), s.pos, false), ground
	}
	if s.esc.inString() && s.st2 != 0 {
		// The payload is contiguous up to pos.
		if f2 := s.pos - s.m.depth(s.st2); f2 < f {
			f, e = f2, s.esc
		}
	}
	if f < s.out {
		f = s.out
	}
	s.heldEsc = e
	return f
}

// release appends [s.out, to) to dst with the masks applied and keeps
// [to, pos) as held. The bytes are held's, then p's from base.
func (s *Stream) release(dst, p []byte, base, to int64) []byte {
	at := func(a int64) byte {
		if a < base {
			return s.held[a-s.out]
		}
		return p[a-base]
	}
	raw := func(dst []byte, a, b int64) []byte {
		if a < base {
			hb := min(b, base)
			dst = append(dst, s.held[a-s.out:hb-s.out]...)
			a = hb
		}
		if a < b {
			dst = append(dst, p[a-base:b-base]...)
		}
		return dst
	}
	cur := s.out
	k := 0
	for ; k < len(s.masks) && s.masks[k].start < to; k++ {
		r := s.masks[k]
		a, b := max(r.start, cur), min(r.end, to)
		dst = raw(dst, cur, a)
		for len(s.aborts) > 0 && s.aborts[0] < a {
			s.aborts = s.aborts[1:]
		}
		if len(s.aborts) > 0 && s.aborts[0] == a {
			dst = append(dst, 0x18)
		}
		// One * per character: a UTF-8 continuation byte adds none,
		// unless it begins the span.
		for x := a; x < b; x++ {
			if x == a || at(x)&0xc0 != 0x80 {
				dst = append(dst, '*')
			}
		}
		s.masked = true
		cur = b
		if r.end > to {
			s.masks[k].start = to
			break
		}
	}
	s.masks = slices.Delete(s.masks, 0, k)
	dst = raw(dst, cur, to)
	for len(s.aborts) > 0 && s.aborts[0] < to {
		s.aborts = s.aborts[1:]
	}

	// Keep [to, pos).
	if to < base {
		n := copy(s.held, s.held[to-s.out:])
		s.held = append(s.held[:n], p...)
	} else {
		s.held = append(s.held[:0], p[to-base:]...)
	}
	s.out = to
	s.pruneSkips(to)
	return dst
}

// rescan reads the held bytes again with m, which replaced s.m, from the
// escape state they began in, releasing what it can.
func (s *Stream) rescan(dst []byte, m *matcher) []byte {
	s.m = m
	if s.pos == s.out {
		// Nothing held, so no partial match: st and st2 are 0.
		return dst
	}
	data := s.held
	s.held = nil
	s.st, s.st2 = 0, 0
	s.esc = s.heldEsc
	s.pos = s.out
	s.skips = s.skips[:0]
	s.aborts = s.aborts[:0] // found again
	base := s.pos
	s.scan(data)
	return s.release(dst, data, base, s.safe())
}
