package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func stars(n int) string { return strings.Repeat("*", n) }

func mustSet(t testing.TB, values ...string) *Set {
	t.Helper()
	s, err := NewSet(values...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	tests := []struct {
		v  string
		ok bool
	}{
		{"abcd", true},
		{"abc", false},
		{"", false},
		{"  ab  \n", false},
		{"é😀ab", true}, // characters, not bytes
		{"é😀a", false},
		{"ab\ncd", true}, // line breaks don't count
		{"\x1b[31mab\x1b[0m", false},
		{"\x1b[31mabcd\x1b[0m", true},
	}
	for _, tt := range tests {
		err := Validate(tt.v)
		if (err == nil) != tt.ok {
			t.Errorf("Validate(%q): got %v, want ok=%v", tt.v, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrTooShort) || err != nil && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Validate(%q): got %v, want ErrTooShort, an ErrInvalid", tt.v, err)
		}
	}
}

func TestAddIsAllOrNothingAndNamesNoValue(t *testing.T) {
	s := mustSet(t)
	err := s.Add("good-value-1", "abc")
	if !errors.Is(err, ErrTooShort) {
		t.Fatalf("Add: got %v, want ErrTooShort", err)
	}
	if strings.Contains(err.Error(), "abc") || strings.Contains(err.Error(), "good-value-1") {
		t.Errorf("Add's error %q holds a value", err)
	}
	if s.Len() != 0 {
		t.Errorf("Len after a refused Add: got %d, want 0", s.Len())
	}
	if got := s.Redact("good-value-1"); got != "good-value-1" {
		t.Errorf("Redact after a refused Add: got %q, want the text unchanged", got)
	}
}

func TestEachAddNeedsItsOwnRemove(t *testing.T) {
	s := mustSet(t, "shared-secret", "shared-secret")
	s.Remove("shared-secret")
	if got := s.Redact("shared-secret"); got != stars(13) {
		t.Errorf("after one of two Removes: got %q, want it masked", got)
	}
	s.Remove("shared-secret", "never-added")
	if got := s.Redact("shared-secret"); got != "shared-secret" {
		t.Errorf("after both Removes: got %q, want it unmasked", got)
	}
}

func TestTheZeroSetIsEmpty(t *testing.T) {
	var s Set
	if got := s.Redact("nothing \x1b[1mto\x1b[0m hide"); got != "nothing \x1b[1mto\x1b[0m hide" {
		t.Errorf("got %q", got)
	}
}

// Every form the spec lists, and the escape codes and line breaks matching
// reads through.
func TestRedactFindsEveryForm(t *testing.T) {
	key := "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n" +
		"VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n" +
		"LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo"
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"the value", []string{"s3cr3t-value"}, "x s3cr3t-value y", "x " + stars(12) + " y"},
		{"twice, and glued to text", []string{"s3cr3t-value"}, "s3cr3t-values3cr3t-value!", stars(24) + "!"},
		{"trimmed", []string{"  padded-secret\n"}, "echo padded-secret;", "echo " + stars(13) + ";"},
		{"JSON-escaped", []string{`pa"ss\wo/rd`}, `{"p":"pa\"ss\\wo/rd"}`, `{"p":"` + stars(13) + `"}`},
		{"JSON-escaped twice", []string{`pa"ss-word`}, `"{\"p\":\"pa\\\"ss-word\"}"`, `"{\"p\":\"` + stars(len(`pa\\\"ss-word`)) + `\"}"`},
		{"JSON with \\/", []string{`pass/word`}, `{"p":"pass\/word"}`, `{"p":"` + stars(10) + `"}`},
		{"JSON, non-ASCII as \\u", []string{"pässwörd"}, `{"p":"p\u00e4ssw\u00f6rd"}`, `{"p":"` + stars(18) + `"}`},
		{"JSON, Go's HTML escapes", []string{"a<b>&c-secret"}, `{"p":"a\u003cb\u003e\u0026c-secret"}`, `{"p":"` + stars(len(`a\u003cb\u003e\u0026c-secret`)) + `"}`},
		{"JSON, a multi-line value", []string{"line-one\nline-two"}, `{"k":"line-one\nline-two"}`, `{"k":"` + stars(18) + `"}`},
		{"URL query, space as +", []string{"p@ss w/rd+x"}, "?pw=p%40ss+w%2Frd%2Bx&a=1", "?pw=" + stars(17) + "&a=1"},
		{"URL, space as %20", []string{"p@ss w/rd+x"}, "?pw=p%40ss%20w%2Frd%2Bx&a=1", "?pw=" + stars(19) + "&a=1"},
		{"URL path", []string{"p@ss w/rd+x"}, "/u/p@ss%20w%2Frd+x/", "/u/" + stars(15) + "/"},
		{"encodeURIComponent", []string{"it's (a) secret!"}, "q=it's%20(a)%20secret!", "q=" + stars(20)},
		{"URL userinfo", []string{"p@ss:w/rd"}, "https://u:p%40ss%3Aw%2Frd@host/", "https://u:" + stars(15) + "@host/"},
		{"a multi-line value as printed", []string{"line-one\nline-two"}, "a line-one\r\nline-two b", "a ********\r\n******** b"},
		{"each long line of a key", []string{key}, "> VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK <", "> " + stars(64) + " <"},
		{"a key's long line, JSON-escaped", []string{key}, `"VTLw7onLRnrq0\/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK"`, `"` + stars(65) + `"`},
		{"not a short line on its own", []string{"ab\ncdefgh-value"}, "cdefgh-value", "cdefgh-value"},
		{"not a PEM armour line", []string{"-----BEGIN RSA PRIVATE KEY-----\n" + key + "\n-----END RSA PRIVATE KEY-----"}, "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----"},
		{"as Markdown prints it, its marks dropped", []string{"tok-_it4l1c_-and-*b0ld*-x"}, "k tok-\x1b[3mit4l1c\x1b[23m-and-\x1b[1mb0ld\x1b[22m-x k",
			"k ****\x1b[3m******\x1b[23m*****\x1b[1m****\x1b[22m** k"},
		{"as Markdown prints it, some of its marks dropped", []string{"tok-_it4l1c_-and-*b0ld*-x"}, "tok-_it4l1c_-and-\x1b[1mb0ld\x1b[22m-x",
			stars(17) + "\x1b[1m****\x1b[22m**"},
		{"as Markdown prints it, past maxMarks all dropped", []string{"a_b_c_d_e_f_g_h-secret"}, "abcdefgh-secret a_bc_d_e_f_g_h-secret",
			stars(15) + " a_bc_d_e_f_g_h-secret"},
		{"coloured mid-way", []string{"s3cr3t-value"}, "s3cr\x1b[1;31m3t-va\x1b[0mlue", "****\x1b[1;31m*****\x1b[0m***"},
		{"256-colour and truecolour codes", []string{"s3cr3t-value"}, "s3\x1b[38;5;196mcr3t\x1b[38;2;255;0;0m-value", "**\x1b[38;5;196m****\x1b[38;2;255;0;0m******"},
		{"wrapped with CR LF", []string{"s3cr3t-value"}, "s3cr3t\r\n-value", "******\r\n******"},
		{"wrapped with LF, CR", []string{"s3cr3t-value"}, "s3c\nr3t\r-value", "***\n***\r******"},
		{"wrapped by a redraw", []string{"s3cr3t-value"}, "s3cr3t\x1b[K\r\n\x1b[?25l-value", "******\x1b[K\r\n\x1b[?25l******"},
		{"a window title mid-way", []string{"s3cr3t-value"}, "s3cr\x1b]0;vim\x073t-value", "****\x1b]0;vim\x07********"},
		{"a hyperlink's URL", []string{"s3cr3t-value"}, "\x1b]8;;https://x/?t=s3cr3t-value\x1b\\link\x1b]8;;\x1b\\", "\x1b]8;;https://x/?t=" + stars(12) + "\x1b\\link\x1b]8;;\x1b\\"},
		{"a charset switch mid-way", []string{"s3cr3t-value"}, "s3cr\x1b(B3t-value", "****\x1b(B********"},
		{"after an unfinished escape code", []string{"éclair-secret"}, "\x1b[38;5;1éclair-secret!", "\x1b[38;5;1\x18" + stars(13) + "!"},
		{"one * per character", []string{"pässwörd-1"}, "x pässwörd-1 y", "x " + stars(10) + " y"},
		{"overlapping values", []string{"abcdefgh", "efghijkl"}, "abcdefghijkl!", stars(12) + "!"},
		{"a value inside another", []string{"cdef", "abcdefgh"}, "xabcdefghx cdef", "x" + stars(8) + "x " + stars(4)},
		{"escape codes alone untouched", []string{"s3cr3t-value"}, "\x1b[31mred\x1b[0m\r\n\x1b]0;t\x07", "\x1b[31mred\x1b[0m\r\n\x1b]0;t\x07"},
		// The pair ab can start a value, so passing over X stops there;
		// reading a twice on the way out would make Xabcd-1 aabcd-1.
		{"nothing false after text passed over", []string{"aabcd-1", "abzzz-2"}, "Xabcd-1 Xabzzz-2", "Xabcd-1 X*******"},
		{"a near miss", []string{"s3cr3t-value"}, "s3cr3t-valu s3cr3t_value", "s3cr3t-valu s3cr3t_value"},
		{"not through a long escape run", []string{"s3cr3t-value"}, "s3cr\x1b]0;" + strings.Repeat("t", 300) + "\x073t-value", "s3cr\x1b]0;" + strings.Repeat("t", 300) + "\x073t-value"},
		{"a long run ends a partial match only", []string{"s3cr3t-value"}, "s3cr\x1b]0;" + strings.Repeat("t", 300) + "\x07s3cr3t-value", "s3cr\x1b]0;" + strings.Repeat("t", 300) + "\x07" + stars(12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSet(t, tt.values...)
			if got := s.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q):\ngot  %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// A value split across two pieces at every offset, plain, coloured and
// wrapped, comes out as from one piece; and across three pieces.
func TestStreamFindsAValueSplitAtEveryOffset(t *testing.T) {
	s := mustSet(t, "s3cr3t-value", "pässwörd-1", "älpha-value")
	tests := []struct{ in, want string }{
		{"before s3cr3t-value after", "before " + stars(12) + " after"},
		{"before s3cr\x1b[1;31m3t-va\x1b[0mlue after", "before ****\x1b[1;31m*****\x1b[0m*** after"},
		{"before s3cr3t\r\n-value after", "before ******\r\n****** after"},
		{"\x1b]8;;https://x/?t=s3cr3t-value\x1b\\s3cr3t-value\x1b]8;;\x1b\\", "\x1b]8;;https://x/?t=" + stars(12) + "\x1b\\" + stars(12) + "\x1b]8;;\x1b\\"},
		{"ä pässwörd-1 ö", "ä " + stars(10) + " ö"},
		{"\x1b[38;5;1älpha-value x", "\x1b[38;5;1\x18" + stars(11) + " x"},
		{`{"v":"s3cr3t-value"}`, `{"v":"` + stars(12) + `"}`},
		{"s3cr3t-vals3cr3t-value", "s3cr3t-val" + stars(12)},
	}
	for _, tt := range tests {
		if got := s.Redact(tt.in); got != tt.want {
			t.Fatalf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
		for i := 0; i <= len(tt.in); i++ {
			if got := streamed(s, tt.in, i); got != tt.want {
				t.Errorf("split at %d of %q:\ngot  %q\nwant %q", i, tt.in, got, tt.want)
			}
			for j := i; j <= len(tt.in); j++ {
				if got := streamed(s, tt.in, i, j); got != tt.want {
					t.Errorf("split at %d and %d of %q:\ngot  %q\nwant %q", i, j, tt.in, got, tt.want)
				}
			}
		}
	}
}

// streamed runs text through a Stream in pieces cut at offsets.
func streamed(s *Set, text string, cuts ...int) string {
	st := s.NewStream()
	var out []byte
	prev := 0
	for _, c := range append(cuts, len(text)) {
		out = st.Redact(out, []byte(text[prev:c]))
		prev = c
	}
	return string(st.Flush(out))
}

func TestStreamHoldsBackOnlyWhatCouldStartAValue(t *testing.T) {
	s := mustSet(t, "s3cr3t-value")
	tests := []struct {
		pieces  []string
		out     string // after the last piece, before Flush
		held    int
		flushed string
	}{
		{[]string{"hello world s3cr"}, "hello world ", 4, "s3cr"},
		{[]string{"hello world"}, "hello world", 0, ""},
		{[]string{"hello s3cr", "3t-val"}, "hello ", 10, "s3cr3t-val"},
		{[]string{"hello s3cr", "x and more"}, "hello s3crx and more", 0, ""},
		{[]string{"hello s3cr", "3t-value and"}, "hello " + stars(12) + " and", 0, ""},
		{[]string{"a s3\x1b[31m"}, "a ", 7, "s3\x1b[31m"},     // the colour code is held with the tail
		{[]string{"a \x1b[31", "m b"}, "a \x1b[31m b", 0, ""}, // an escape code alone is never held
		{[]string{"\x1b]0;title s3cr"}, "\x1b]0;title ", 4, "s3cr"},
		{[]string{"s3cr3t-values3"}, stars(12), 2, "s3"},
	}
	for _, tt := range tests {
		st := s.NewStream()
		var out []byte
		for _, p := range tt.pieces {
			out = st.Redact(out, []byte(p))
		}
		if string(out) != tt.out || st.Held() != tt.held {
			t.Errorf("%q: got %q holding %d, want %q holding %d", tt.pieces, out, st.Held(), tt.out, tt.held)
		}
		if got := string(st.Flush(nil)); got != tt.flushed {
			t.Errorf("%q: Flush: got %q, want %q", tt.pieces, got, tt.flushed)
		}
		if st.Held() != 0 {
			t.Errorf("%q: holding %d after Flush", tt.pieces, st.Held())
		}
	}
}

// A value added while a stream runs applies to what it holds, and a value
// removed stops being masked from the next piece.
func TestStreamFollowsItsSet(t *testing.T) {
	s := mustSet(t, "s3cr3t-value")
	st := s.NewStream()
	out := st.Redact(nil, []byte("token: s3cr"))
	if string(out) != "token: " {
		t.Fatalf("got %q, want %q", out, "token: ")
	}
	// The tail held for the old value is the start of the new one.
	if err := s.Add("s3crXYZW"); err != nil {
		t.Fatal(err)
	}
	s.Remove("s3cr3t-value")
	out = st.Redact(out, []byte("XYZW then s3cr3t-value"))
	out = st.Flush(out)
	if want := "token: " + stars(8) + " then s3cr3t-value"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}

	// Added after the first piece, with nothing held.
	st = s.NewStream()
	out = st.Redact(nil, []byte("new-value-42 "))
	if err := s.Add("new-value-42"); err != nil {
		t.Fatal(err)
	}
	out = st.Flush(st.Redact(out, []byte("new-value-42")))
	if want := "new-value-42 " + stars(12); string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// Values come and go while streams read with the Set from other goroutines
// (run with -race): a value held throughout is always masked.
func TestSetChangesWhileStreamsRun(t *testing.T) {
	s := mustSet(t, "always-masked-1")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			v := fmt.Sprintf("passing-value-%03d", i)
			if err := s.Add(v); err != nil {
				t.Error(err)
				return
			}
			s.Remove(v)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if got := streamed(s, "x always-masked-1 passing-value-007 y", 5, 11); strings.Contains(got, "always") {
			t.Fatalf("got %q", got)
		}
	}
}
