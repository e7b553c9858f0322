package redact

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// The gitleaks release whose rule examples are the corpus, and the sum of
// its module as go.sum would hold it, so a different module is refused.
const (
	gitleaksModule  = "github.com/zricethezav/gitleaks/v8"
	gitleaksVersion = "v8.30.1"
	gitleaksSum     = "h1:PmEvCfVI7ti9dV3s5aMZUY7sS2GxRvG3yzih7E+cS3w="
)

// A gitleaksRule is one rule's examples as gitleaks writes them: each true
// positive with the secrets and matches gitleaks finds in it, and the false
// positives.
type gitleaksRule struct {
	ID             string   `json:"id"`
	FalsePositives []string `json:"falsePositives"`
	// FlaggedByGitleaks says, for each false positive, whether gitleaks'
	// whole default ruleset finds a secret in it: many of one rule's false
	// positives are another's true positives.
	FlaggedByGitleaks []bool `json:"flaggedByGitleaks"`
	TruePositives     []struct {
		Line    string   `json:"line"`
		Secrets []string `json:"secrets"`
		Matches []string `json:"matches"`
	} `json:"truePositives"`
}

// gitleaksCorpus returns gitleaks' rule examples. They live in the code
// that generates its config (cmd/generate/config/rules), which checks each
// rule against them; the test runs that code from a copy of the module in
// which testdata/gitleaks/validate.go writes them out instead. The result
// is cached, since the build takes a while.
func gitleaksCorpus(t *testing.T) []gitleaksRule {
	t.Helper()
	dumper, err := os.ReadFile("testdata/gitleaks/validate.go")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(dumper)
	cache := filepath.Join(testkit.CacheDir(), fmt.Sprintf("gitleaks-%s-examples-%x.jsonl", gitleaksVersion, sum[:6]))
	b, err := os.ReadFile(cache)
	if err != nil {
		b = dumpGitleaksExamples(t, dumper)
		if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := cache + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cache); err != nil {
			t.Fatal(err)
		}
	}
	var rules []gitleaksRule
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r gitleaksRule
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", cache, err)
		}
		rules = append(rules, r)
	}
	if len(rules) < 200 {
		t.Fatalf("%s holds %d rules; gitleaks %s has 220", cache, len(rules), gitleaksVersion)
	}
	return rules
}

func dumpGitleaksExamples(t *testing.T, dumper []byte) []byte {
	t.Helper()
	goTool, src := gitleaksSource(t)
	gen := filepath.Join(src, "cmd", "generate", "config")
	if err := os.WriteFile(filepath.Join(gen, "utils", "validate.go"), dumper, 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(goTool, "run", ".", filepath.Join(t.TempDir(), "gitleaks.toml"))
	run.Dir = gen
	run.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("running gitleaks' config generator: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// gitleaksSource returns the go command and a writable copy of gitleaks'
// pinned module, checked against its sum.
func gitleaksSource(t testing.TB) (goTool, src string) {
	t.Helper()
	goTool = testenv.RequireCommand(t, "go")
	dl := exec.Command(goTool, "mod", "download", "-json", gitleaksModule+"@"+gitleaksVersion)
	dl.Dir = t.TempDir() // outside kndl's module: gitleaks is not one of its dependencies
	out, err := dl.Output()
	if err != nil {
		testenv.Lack(t, "the Go module "+gitleaksModule+"@"+gitleaksVersion+" (go mod download: "+err.Error()+")")
	}
	var mod struct{ Dir, Sum string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Sum != gitleaksSum {
		t.Fatalf("%s@%s has sum %s, want %s", gitleaksModule, gitleaksVersion, mod.Sum, gitleaksSum)
	}
	src = filepath.Join(t.TempDir(), "gitleaks")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		t.Fatal(err)
	}
	// The module cache is read-only, and so is the copy.
	if err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		t.Fatal(err)
	}
	return goTool, src
}

// TestGitleaksCorpus holds the registry to gitleaks' own rule examples:
// of the distinct secrets gitleaks finds in its true positives, at least
// 95% are masked both alone (gitleaks' match, as a log line might carry it)
// and in every example line that holds them; at most 1% of its false
// positives get a mark where gitleaks' own default ruleset finds nothing.
func TestGitleaksCorpus(t *testing.T) {
	rules := gitleaksCorpus(t)
	type secret struct {
		match   string
		lines   []string
		ruleIDs []string
	}
	secrets := map[string]*secret{}
	var order []string
	lines, fps := 0, 0
	for _, r := range rules {
		for _, tp := range r.TruePositives {
			lines++
			for i, s := range tp.Secrets {
				if secrets[s] == nil {
					secrets[s] = &secret{match: tp.Matches[i]}
					order = append(order, s)
				}
				secrets[s].lines = append(secrets[s].lines, tp.Line)
				secrets[s].ruleIDs = append(secrets[s].ruleIDs, r.ID)
			}
		}
	}
	bare, written := 0, 0
	var missBare, missWritten []string
	for _, s := range order {
		sec := secrets[s]
		if !strings.Contains(Scrub(sec.match), s) {
			bare++
		} else {
			missBare = append(missBare, sec.ruleIDs[0]+": "+sec.match)
		}
		ok := true
		for _, l := range sec.lines {
			if strings.Contains(Scrub(l), s) {
				ok = false
				missWritten = append(missWritten, sec.ruleIDs[0]+": "+l)
				break
			}
		}
		if ok {
			written++
		}
	}
	var alarms []string
	alsoGitleaks := 0
	for _, r := range rules {
		for i, fp := range r.FalsePositives {
			fps++
			switch got := Scrub(fp); {
			case got == fp:
			case r.FlaggedByGitleaks[i]:
				alsoGitleaks++
			default:
				alarms = append(alarms, r.ID+": "+got)
			}
		}
	}
	n := len(order)
	t.Logf("gitleaks %s: %d rules, %d true-positive lines, %d distinct secrets, %d false-positive lines", gitleaksVersion, len(rules), lines, n, fps)
	t.Logf("caught alone: %d (%.1f%%); in every line that holds them: %d (%.1f%%)", bare, pct(bare, n), written, pct(written, n))
	t.Logf("false positives marked: %d (%.2f%%) where gitleaks' whole ruleset finds nothing, %d more where it finds a secret too",
		len(alarms), pct(len(alarms), fps), alsoGitleaks)
	for _, m := range missBare {
		t.Logf("missed alone: %.200s", m)
	}
	for _, m := range missWritten {
		t.Logf("missed as written: %.200s", m)
	}
	for _, a := range alarms {
		t.Logf("false alarm: %.200s", a)
	}
	if pct(bare, n) < 95 || pct(written, n) < 95 {
		t.Errorf("recall below 95%%: alone %.1f%%, as written %.1f%%", pct(bare, n), pct(written, n))
	}
	if pct(len(alarms), fps) > 1 {
		t.Errorf("%.2f%% of gitleaks' false positives marked, want at most 1%%", pct(len(alarms), fps))
	}
}

func pct(a, b int) float64 { return 100 * float64(a) / float64(b) }

// TestScrubLeavesGoSourceAlone: Go's net/http, 2.2 MB of code, tests and
// fixtures full of URLs, headers and made-up keys, gets no mark.
func TestScrubLeavesGoSourceAlone(t *testing.T) {
	goTool := testenv.RequireCommand(t, "go")
	out, err := exec.Command(goTool, "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "src", "net", "http")
	size, files := 0, 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		size += len(b)
		files++
		for _, f := range Find(string(b)) {
			line := lineAt(string(b), f.Start, f.End)
			t.Errorf("%s: %s marks %.160q", strings.TrimPrefix(p, dir+"/"), f.Detector, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if size < 2<<20 {
		t.Fatalf("read %d bytes of %s, want at least 2 MiB", size, dir)
	}
	t.Logf("%d files, %d bytes", files, size)
}
