package gitrelay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

const (
	zero = "0000000000000000000000000000000000000000"
	a1   = "1111111111111111111111111111111111111111"
	b2   = "2222222222222222222222222222222222222222"
)

// TestThePushPolicyTakesTheSessionsOwnBranchesAlone walks every kind of
// ref (its own made here, its own found, another branch, the default
// branch, a tag) with every kind of update (create, update, delete).
func TestThePushPolicyTakesTheSessionsOwnBranchesAlone(t *testing.T) {
	const prefix = "kndl/1a2b3c4d/"
	made := func(b string) bool { return b == prefix+"made" }
	kinds := []struct {
		name     string
		old, new string
	}{{"create", zero, a1}, {"update", a1, b2}, {"delete", a1, zero}}
	refs := []struct {
		ref  string
		want map[string]string // kind -> verdict's start, "" to take it
	}{
		{"refs/heads/" + prefix + "made", map[string]string{"create": "", "update": "", "delete": "kndl does not delete"}},
		{"refs/heads/" + prefix + "found", map[string]string{"create": "", "update": "not made by this Session", "delete": "kndl does not delete"}},
		{"refs/heads/" + prefix + "deep/er", map[string]string{"create": "", "update": "not made by this Session", "delete": "kndl does not delete"}},
		{"refs/heads/main", map[string]string{"create": "not this Session's", "update": "not this Session's", "delete": "not this Session's"}},
		{"refs/heads/other", map[string]string{"create": "not this Session's", "update": "not this Session's", "delete": "not this Session's"}},
		{"refs/heads/kndl/ffffffff/x", map[string]string{"create": "not this Session's", "update": "not this Session's", "delete": "not this Session's"}},
		{"refs/heads/kndl/1a2b3c4dx", map[string]string{"create": "not this Session's", "update": "not this Session's", "delete": "not this Session's"}},
		{"refs/tags/" + prefix + "v1", map[string]string{"create": "kndl pushes branches only", "update": "kndl pushes branches only", "delete": "kndl pushes branches only"}},
		{"refs/notes/commits", map[string]string{"create": "kndl pushes branches only", "update": "kndl pushes branches only", "delete": "kndl pushes branches only"}},
	}
	for _, r := range refs {
		for _, k := range kinds {
			t.Run(k.name+" "+r.ref, func(t *testing.T) {
				got := string(judge(Update{Old: k.old, New: k.new, Ref: r.ref}, prefix, made))
				want := r.want[k.name]
				if (want == "") != (got == "") || !strings.HasPrefix(got, want) {
					t.Errorf("got %q, want %q", got, want)
				}
			})
		}
	}
}

func pkts(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			b.WriteString("0000")
			continue
		}
		b.Write(pkt(l))
	}
	return b.String()
}

// TestReadCommandsReadsTheCommandsAloneWithinItsCaps: it stops at the
// flush after the commands, leaving the pack unread, and refuses what
// exceeds a cap or is not a command.
func TestReadCommandsReadsTheCommandsAloneWithinItsCaps(t *testing.T) {
	first := zero + " " + a1 + " refs/heads/kndl/x\x00report-status side-band-64k agent=git/2.39\n"
	body := pkts("shallow "+b2+"\n", first, a1+" "+b2+" refs/heads/kndl/y\n", "") + "PACK\x00\x00\x00\x02the pack"
	r := strings.NewReader(body)
	c, err := readCommands(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []Update{{zero, a1, "refs/heads/kndl/x"}, {a1, b2, "refs/heads/kndl/y"}}
	if fmt.Sprint(c.updates) != fmt.Sprint(want) || fmt.Sprint(c.caps) != "[report-status side-band-64k agent=git/2.39]" {
		t.Errorf("got %v %v, want %v with the capabilities", c.updates, c.caps, want)
	}
	rest, _ := io.ReadAll(r)
	if string(c.head)+string(rest) != body || string(rest) != "PACK\x00\x00\x00\x02the pack" {
		t.Errorf("read %q, left %q: want the commands read and the pack left", c.head, rest)
	}

	many := []string{first}
	for range maxCommands {
		many = append(many, a1+" "+b2+" refs/heads/kndl/y\n")
	}
	bad := []struct {
		name, body string
	}{
		{"a line over the cap", "ffff" + strings.Repeat("x", 100)},
		{"a command line over the cap", pkts(zero + " " + a1 + " refs/heads/" + strings.Repeat("x", maxCommandLine))},
		{"too many commands", pkts(append(many, "")...)},
		{"no commands", pkts("")},
		{"cut short", pkts(first)},
		{"not hex", "zzzz" + first},
		{"a delim", "0001"},
		{"a short id", pkts(zero+" "+a1[:20]+" refs/heads/x\n", "")},
		{"ids of two lengths", pkts(zero+" "+a1+a1[:24]+" refs/heads/x\n", "")},
		{"a ref with ..", pkts(zero+" "+a1+" refs/heads/a..b\n", "")},
		{"a ref outside refs/", pkts(zero+" "+a1+" HEAD\n", "")},
		{"a ref with a space", pkts(zero+" "+a1+" refs/heads/a b\n", "")},
		{"capabilities twice", pkts(first, a1+" "+b2+" refs/heads/y\x00atomic\n", "")},
		{"upper-case hex", pkts(zero+" "+strings.Repeat("A", 40)+" refs/heads/x\n", "")},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readCommands(strings.NewReader(tt.body)); !errors.Is(err, errMalformed) {
				t.Errorf("got %v, want errMalformed", err)
			}
		})
	}
}

// TestTheReportReaderFindsTheRefsTheForgeTook, in a side band and without,
// however the answer is cut into reads, and passes it through unchanged.
func TestTheReportReaderFindsTheRefsTheForgeTook(t *testing.T) {
	report := pkts("unpack ok\n", "ok refs/heads/kndl/x\n", "ng refs/heads/kndl/y non-fast-forward\n", "")
	banded := pkts("\x02Resolving deltas\n", "\x01"+report[:10], "\x01"+report[10:], "")
	for _, tt := range []struct {
		name     string
		sideband bool
		answer   string
	}{{"plain", false, report}, {"side band", true, banded}} {
		for _, chunk := range []int{1, 3, 7, 4096} {
			t.Run(fmt.Sprintf("%s in reads of %d", tt.name, chunk), func(t *testing.T) {
				p := &reportReader{r: &chunked{s: tt.answer, n: chunk}, sideband: tt.sideband}
				var out bytes.Buffer
				io.Copy(&out, p)
				if out.String() != tt.answer || fmt.Sprint(p.ok) != "[refs/heads/kndl/x]" {
					t.Errorf("got %v passing %q, want [refs/heads/kndl/x] passing it unchanged", p.ok, out.String())
				}
			})
		}
	}
}

type chunked struct {
	s string
	n int
}

func (c *chunked) Read(b []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}
