package redact

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

type fixture struct {
	detector, name string
	text, want     string
}

// readCorpus parses a corpus file: "=== <detector>: <what it is>", the text
// and, in the positive corpus, "--- scrubbed" and the expected output.
// Lines starting with # before the first fixture are comments.
func readCorpus(t *testing.T, path string) []fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	var cur *fixture
	var body []string
	end := func() {
		if cur == nil {
			return
		}
		text, want, found := strings.Cut(strings.Join(body, "\n"), "\n--- scrubbed\n")
		cur.text = text
		if found {
			cur.want = want
		}
		out = append(out, *cur)
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "=== "); ok {
			end()
			det, name, ok := strings.Cut(rest, ": ")
			if !ok {
				t.Fatalf("%s: fixture header %q lacks \": \"", path, line)
			}
			cur, body = &fixture{detector: det, name: name}, nil
			continue
		}
		if cur == nil {
			if !strings.HasPrefix(line, "#") {
				t.Fatalf("%s: text before the first fixture: %q", path, line)
			}
			continue
		}
		body = append(body, line)
	}
	end()
	return out
}

func positives(t *testing.T) []fixture { return readCorpus(t, "testdata/shapes/positive.txt") }
func negatives(t *testing.T) []fixture { return readCorpus(t, "testdata/shapes/negative.txt") }

func TestScrubRemovesEveryCorpusCredential(t *testing.T) {
	for _, f := range positives(t) {
		t.Run(f.detector+"/"+f.name, func(t *testing.T) {
			if got := Scrub(f.text); got != f.want {
				t.Errorf("Scrub:\ngot  %q\nwant %q", got, f.want)
			}
			if got := Scrub(f.want); got != f.want {
				t.Errorf("Scrub of its own output changed it:\ngot  %q\nwant %q", got, f.want)
			}
			found := false
			for _, fd := range Find(f.text) {
				found = found || fd.Detector == f.detector
			}
			if !found {
				t.Errorf("detector %s found nothing; Find: %v", f.detector, Find(f.text))
			}
		})
	}
}

func TestScrubLeavesOrdinaryTextAlone(t *testing.T) {
	for _, f := range negatives(t) {
		t.Run(f.detector+"/"+f.name, func(t *testing.T) {
			if got := Find(f.text); len(got) != 0 {
				t.Errorf("Find: got %v, want nothing; Scrub: %q", got, Scrub(f.text))
			}
		})
	}
}

func TestEveryDetectorIsHeldToTheCorpus(t *testing.T) {
	pos, neg := map[string]int{}, map[string]int{}
	names := map[string]bool{"any": true}
	for _, d := range Detectors() {
		names[d.Name] = true
	}
	for _, f := range positives(t) {
		pos[f.detector]++
		if !names[f.detector] || f.detector == "any" {
			t.Errorf("positive fixture %q names %q, which is no detector", f.name, f.detector)
		}
		if f.want == "" || f.want == f.text || !strings.Contains(f.want, "[masked: ") {
			t.Errorf("positive fixture %q has no scrubbed form with a marker", f.name)
		}
	}
	for _, f := range negatives(t) {
		neg[f.detector]++
		if !names[f.detector] {
			t.Errorf("negative fixture %q names %q, which is no detector", f.name, f.detector)
		}
	}
	for _, d := range Detectors() {
		if len(d.Examples) > 0 {
			continue // held by TestEveryRuleFindsItsExamples and the gitleaks corpus
		}
		if pos[d.Name] == 0 {
			t.Errorf("detector %s has no positive fixture in testdata/shapes/positive.txt", d.Name)
		}
		if neg[d.Name] == 0 {
			t.Errorf("detector %s has no negative fixture in testdata/shapes/negative.txt", d.Name)
		}
	}
}

// A credential in its context must go whatever surrounds it: each positive
// fixture's text, glued into the middle of every negative one, loses what
// Scrub removed from it alone.
func TestScrubFindsCredentialsAmidOrdinaryText(t *testing.T) {
	for _, p := range positives(t) {
		for _, n := range negatives(t) {
			mid := len(n.text) / 2
			for mid < len(n.text) && n.text[mid] != '\n' {
				mid++
			}
			text := n.text[:mid] + "\n" + p.text + "\n" + n.text[mid:]
			want := n.text[:mid] + "\n" + p.want + "\n" + n.text[mid:]
			if got := Scrub(text); got != want {
				t.Errorf("%s amid %s:\ngot  %q\nwant %q", p.name, n.name, got, want)
			}
		}
	}
}

// Scanning is linear: text full of candidates every detector rejects takes
// time in proportion to its length. Quadratic rescanning of a 2 MiB input
// would take minutes; linear takes well under a second here.
func TestScrubTimeIsLinearInRejectedCandidates(t *testing.T) {
	unit := "ghp_" + strings.Repeat("a", 40) + " sk-ant-api03-... -----BEGIN RSA PRIVATE KEY----- Authorization: Bearer x " +
		"eyJhbGciOi.eyJ AKIAIOSFODNN7EXAMPLE aws_secret_access_key = short https://u:${P}@h "
	text := strings.Repeat(unit, 2<<20/len(unit))
	start := time.Now()
	if got := Find(text); len(got) != 0 {
		t.Fatalf("Find: got %d findings in text of rejected candidates, want 0: %v", len(got), got[0])
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Find of %d bytes took %v", len(text), d)
	}
}

// Every rule of the table finds a credential in each of its examples, and
// Scrub masks it under the rule's or another Marked rule's name.
func TestEveryRuleFindsItsExamples(t *testing.T) {
	n := 0
	for _, d := range Detectors() {
		if d.Description == "" {
			t.Errorf("rule %s has no description", d.Name)
		}
		for _, ex := range d.Examples {
			n++
			found := false
			for _, f := range Find(ex) {
				found = found || f.Detector == d.Name
			}
			if !found {
				t.Errorf("rule %s finds nothing in its example %q; Scrub: %q", d.Name, ex, Scrub(ex))
			}
		}
	}
	if n == 0 {
		t.Fatal("no rule has an example")
	}
}

// TestRequiredLiteralsHoldInEveryMatch: the words a rule's window must hold
// before its regexp runs are in every match of its examples, so the quick
// check loses no catch; and text beyond ASCII, which (?i) may fold to an
// ASCII letter (the Kelvin sign to k), always passes it.
func TestRequiredLiteralsHoldInEveryMatch(t *testing.T) {
	for _, d := range Detectors() {
		if d.tail != nil {
			continue
		}
		for _, ex := range d.Examples {
			for _, m := range d.re.FindAllStringIndex(ex, -1) {
				if !holdsAll(ex[m[0]:m[1]], d.needs) {
					t.Errorf("%s: match %q lacks one of %v", d.Name, ex[m[0]:m[1]], d.needs)
				}
			}
		}
	}
	if needs := requiredLiterals(`(?i)kind:`); !holdsAll("\u212Aind:", needs) || holdsAll("kin d:", needs) {
		t.Errorf("requiredLiterals(kind:) = %v: wrong on the Kelvin sign or on a near miss", needs)
	}
}

// TestAssignRulesCaptureAfterTheOperator: the rules for named secrets
// capture nothing before their assignment operator, and their secret right
// after it and the quotes, spaces or '=' that follow (maxOperator bytes in
// all), so a secret's run of bytes is looked for there alone (assignAfter).
func TestAssignRulesCaptureAfterTheOperator(t *testing.T) {
	const op = `(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)`
	const then = `[\x60'"\s=]{0,5}(`
	for _, d := range Detectors() {
		if !d.assign {
			continue
		}
		s := d.tail.String()
		i := strings.Index(s, op)
		if i < 0 {
			t.Errorf("%s: no assignment operator in %s", d.Name, s)
			continue
		}
		if rest := s[i+len(op):]; !strings.HasPrefix(rest, then) || strings.HasPrefix(rest, then+"?") {
			t.Errorf("%s: no secret captured right after the operator in %s", d.Name, s)
		}
		for j := 0; j < i; j++ {
			if s[j] == '\\' {
				j++
			} else if s[j] == '(' && s[j+1] != '?' {
				t.Errorf("%s: a group captured before the operator in %s", d.Name, s)
			}
		}
	}
}

// TestScrubFindsAfterEveryLead: the walk passes over text no needed word
// begins in, from the root or one byte into a word; a credential right
// after such a byte, a line break, an escape or at the very end is found.
func TestScrubFindsAfterEveryLead(t *testing.T) {
	const tok = "ghp_O9hFAiOh29oB93c0F6UJ5YtuALNUEJMUUqAs"
	for _, lead := range []string{"", "g", "gg", "G", "x", "xy ", "s", "sk", "a\n", "a\r\n", "\x1b[0m", "zzz\nq "} {
		if got := Scrub(lead + tok); strings.Contains(got, tok[4:]) {
			t.Errorf("Scrub(%q + token) = %q: not masked", lead, got)
		}
	}
}

// The quick checks before a rule's regexp answer as the plain reads they
// replace, on random text over the bytes they care about: a literal's
// search (its rarest byte, either case, a byte beyond ASCII), a find's
// memory of where literals are and are not, a named secret's run read
// once a hit, and a line's runs, for windows anywhere in the line and at
// its ends.
func TestQuickChecksAnswerAsThePlainReads(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	random := func(alphabet []string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	letters := append(strings.Fields("k K i I n N d D : x = \" ' é \u212A"), " ", "\t")
	lits := []literals{{alts: []string{"kind:"}, fold: true}, {alts: []string{"nd", "xk"}, fold: true}, {alts: []string{"Kind"}}, {alts: []string{":"}}}
	for range 2000 {
		s := random(letters, r.IntN(40))
		for _, l := range lits {
			want := false
			for _, a := range l.alts {
				want = want || !l.fold && strings.Contains(s, a) || l.fold && strings.Contains(strings.ToLower(s), a)
			}
			want = want || l.fold && strings.ContainsFunc(s, func(c rune) bool { return c >= utf8.RuneSelf })
			i, n := l.index(s)
			if got := i >= 0; got != want || got && !(n == 1 && s[i] >= utf8.RuneSelf || l.in(s[i:i+n])) {
				t.Fatalf("%v.index(%q) = %d, %d; want found %v", l.alts, s, i, n, want)
			}
		}
	}

	// Literals found now and then, so windows meet and cross the edges of
	// what a find saw.
	lits = []literals{{alts: []string{"ndn"}, fold: true}, {alts: []string{"ddx", "xnx"}}, {alts: []string{"Nd"}}}
	reg := &registry{lits: lits}
	needs := []need{{0, false}, {1, false}, {2, true}}
	for range 500 {
		text := random([]string{"n", "d", "x", "N", " "}, 300)
		known := make([]seen, len(lits))
		from := 0
		for range 50 {
			if r.IntN(4) == 0 {
				from = r.IntN(len(text)) // now and then a window behind the last
			} else {
				from = min(from+r.IntN(20), len(text))
			}
			to := min(from+r.IntN(80), len(text))
			hit := from + r.IntN(to-from+1)
			end := min(hit+4, to)
			want := holdsAll(text[from:to], lits[:3])
			if got := reg.holds(text, hit, end, from, to, needs, known); got != want {
				t.Fatalf("holds(%q[%d:%d]) = %v, want %v", text, from, to, got, want)
			}
		}
	}

	ops := append(strings.Fields("a Z 9 _ - = : > | , ? ' \" `"), " ", "\t", "\n")
	for range 5000 {
		text := random(ops, r.IntN(60))
		end := r.IntN(len(text) + 1)
		a := readAssignment(text, end, 12)
		if a.op < 0 {
			continue
		}
		to := a.op + 1 + r.IntN(len(text)-a.op)
		n := 1 + r.IntN(12)
		if got, want := a.hasRun(text, to, n), hasRun(text[a.op:min(to, a.by+n)], n); got != want {
			t.Fatalf("readAssignment(%q, %d).hasRun(%d, %d) = %v, want %v", text, end, to, n, got, want)
		}
	}

	var runs lineRuns
	for range 2000 {
		line := random(ops, r.IntN(50))
		runs.read(line, 0, len(line))
		from := r.IntN(len(line) + 1)
		to := from + r.IntN(len(line)-from+1)
		n := 1 + r.IntN(8)
		if got, want := runs.has(from, to, n), hasRun(line[from:to], n); got != want {
			t.Fatalf("runs of %q: has(%d, %d, %d) = %v, want %v", line, from, to, n, got, want)
		}
	}
}

// A rule runs anchored at its word when every match begins with one of
// its words, which Go's parser hides by factoring (AKIA|ASIA is
// A(?:KIA|SIA)); a match that may begin before the word is not anchored.
func TestRulesAnchorWhereEveryMatchBeginsWithAWord(t *testing.T) {
	tests := []struct {
		pattern         string
		words           []string
		wantBound, want bool
	}{
		{`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`, []string{"a3t", "akia", "asia", "abia", "acca"}, true, true},
		{`(eyJ[A-Za-z0-9_-]{5,}\.eyJ)`, []string{"eyJ"}, false, true},
		{`(?i)bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`, []string{"bearer"}, false, true},
		{`(?i)(?:proxy-)?authorization[ \t]*:`, []string{"authorization"}, false, false},
		{`x?(?:AKIA|ASIA)[A-Z]{16}`, []string{"akia", "asia"}, false, false},
		{`(?:AKIA|ASIB)[A-Z]{16}`, []string{"akia", "asia"}, false, false},
	}
	for _, tt := range tests {
		if bound, ok := startsWithWord(tt.pattern, tt.words); bound != tt.wantBound || ok != tt.want {
			t.Errorf("startsWithWord(%s) = %v, %v; want %v, %v", tt.pattern, bound, ok, tt.wantBound, tt.want)
		}
	}
}

// A rule whose every match begins with one of a few strings runs its
// regexp anchored only where one begins, and finds just what the regexp
// finds over the whole window: in its examples, in the mask inputs' lines,
// and with a word byte glued before or after each place one begins, where
// a leading \b decides.
func TestAWindowReadFromItsStartsFindsWhatItsRegexpFinds(t *testing.T) {
	lines := maskLines(t)
	rules := 0
	for _, d := range allRules().ds {
		if d.starts == nil {
			continue
		}
		rules++
		texts := slices.Concat(d.Examples, lines)
		for _, ex := range d.Examples {
			for _, s := range d.starts {
				for _, glue := range []string{"x", "_", "-", " ", "\n"} {
					texts = append(texts, strings.ReplaceAll(strings.ToLower(ex), s, glue+s), strings.ReplaceAll(ex, "\n", glue+"\n"))
				}
			}
			texts = append(texts, ex+"\n"+ex, ex+ex)
		}
		for _, text := range texts {
			if indexNonASCII(text) >= 0 {
				continue
			}
			var want []Finding
			for _, m := range d.re.FindAllStringSubmatchIndex(text, -1) {
				want = d.accept(text, m, want, nil)
			}
			if got := d.findAtStarts(text, 0, len(text), nil, nil); !slices.Equal(got, want) {
				t.Errorf("%s over %q: got %v, want %v", d.Name, text, got, want)
			}
		}
	}
	if rules < 5 {
		t.Errorf("%d rules read from their starts, want kubernetes-secret-yaml and the others (5 or more)", rules)
	}
}

// Scrub, which checks a Named finding only if no Marked one holds its
// secret (settle), masks what it masks when every finding is checked.
func TestScrubMasksAsIfEveryFindingWereChecked(t *testing.T) {
	for name, text := range maskInputs(t) {
		if got, want := Scrub(text), withMarks(text, merged(Find(text))); got != want {
			t.Errorf("%s: Scrub differs from the marks of every finding", name)
		}
	}
}

// A token that begins inside the window an earlier one's regexp read, on
// the same line, and ends past it, is found: its rule runs anchored at its
// word, where it once ran over a window ending inside the token and then
// passed over the token's word as read.
func TestScrubFindsATokenEndingPastAnEarlierWindow(t *testing.T) {
	text := `String AWSToken = "ACCAMFFNZ466HHFGKCYC"; \nBACKUP_ENABLED=true"}{"config.ini": "AWS_TOKEN=ASIAHCOPFMXUJK5KPMWW`
	for _, tok := range []string{"ACCAMFFNZ466HHFGKCYC", "ASIAHCOPFMXUJK5KPMWW"} {
		if got := ScrubMarked(text); strings.Contains(got, tok) {
			t.Errorf("ScrubMarked: %s not masked in %q", tok, got)
		}
	}
}
