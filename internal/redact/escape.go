package redact

// escState is where a terminal's parser would be, as far as matching needs:
// it sorts each byte into content (matched against values), skip (escape
// sequences and line breaks, which may fall inside a value and are kept in
// the output) and payload (the text of an OSC or other string sequence: a
// window title, a hyperlink's URL, which is matched on its own).
//
// The grammar is ECMA-48's as xterm reads it, in 7-bit form only: 8-bit C1
// codes such as 0x9b are UTF-8 continuation bytes in the text we see.
//
//	ESC [ params(0x30-0x3f)* inter(0x20-0x2f)* final(0x40-0x7e)   CSI, e.g. SGR colours
//	ESC ] payload (BEL | ESC \)                                    OSC
//	ESC (P|X|^|_) payload ESC \                                    DCS, SOS, PM, APC
//	ESC inter(0x20-0x2f)* final(0x30-0x7e)                         e.g. ESC ( B, ESC 7
//	CR, LF
//
// A byte that cannot continue a sequence ends it and is read afresh.
type escState uint8

const (
	ground escState = iota
	escStart
	escInter
	csi
	oscStr // OSC payload
	dcsStr // DCS, SOS, PM or APC payload
	oscEsc // ESC inside an OSC: ST or a new sequence
	dcsEsc
)

type byteKind uint8

const (
	kContent byteKind = iota
	kSkip
	kPayload
)

func (e escState) inString() bool { return e == oscStr || e == dcsStr }

// step sorts b and moves e past it.
func (e *escState) step(b byte) byteKind {
	for {
		switch *e {
		case ground:
			switch b {
			case '\r', '\n':
				return kSkip
			case 0x1b:
				*e = escStart
				return kSkip
			}
			return kContent
		case escStart:
			switch {
			case b == '[':
				*e = csi
			case b == ']':
				*e = oscStr
			case b == 'P' || b == 'X' || b == '^' || b == '_':
				*e = dcsStr
			case b == 0x1b:
			case 0x20 <= b && b <= 0x2f:
				*e = escInter
			case 0x30 <= b && b <= 0x7e:
				*e = ground
			default:
				*e = ground
				continue
			}
			return kSkip
		case escInter:
			switch {
			case 0x20 <= b && b <= 0x2f:
			case 0x30 <= b && b <= 0x7e:
				*e = ground
			default:
				*e = ground
				continue
			}
			return kSkip
		case csi:
			switch {
			case 0x20 <= b && b <= 0x3f:
			case 0x40 <= b && b <= 0x7e:
				*e = ground
			default:
				*e = ground
				continue
			}
			return kSkip
		case oscStr, dcsStr:
			switch {
			case b == 0x1b:
				*e += oscEsc - oscStr
				return kSkip
			case b == 0x07 && *e == oscStr:
				*e = ground
				return kSkip
			}
			return kPayload
		case oscEsc, dcsEsc:
			if b == '\\' {
				*e = ground
				return kSkip
			}
			*e = escStart
			continue
		}
		panic("unreachable")
	}
}

// content returns the bytes of s that matching compares: s without its
// escape sequences, string payloads and line breaks.
func content(s string) string {
	var e escState
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if e.step(s[i]) == kContent {
			out = append(out, s[i])
		}
	}
	return string(out)
}
