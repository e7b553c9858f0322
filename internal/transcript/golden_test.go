package transcript_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/transcript"
)

var update = flag.Bool("update", false, "rewrite testdata/*/events.golden.json from the transcripts there; "+
	"with TestRealRecordings, record the transcripts again first")

// testdata/<case>/ holds what the real Claude Code wrote for one case (see
// real_test.go), laid out as in its project directory: <conversation>.jsonl
// and <conversation>/subagents/agent-<id>.jsonl with .meta.json; and
// events.golden.json, the Events a Tailer makes of them.
func TestGolden(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/*")
	if len(dirs) == 0 {
		t.Fatal("no cases in testdata/")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := marshalEvents(t, readCase(t, dir))
			golden := filepath.Join(dir, "events.golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run with -update to accept them):\n%s", golden, diffLines(string(got), string(want)))
			}
		})
	}
}

// readCase reads a case's transcript whole, as a Tailer from the start.
func readCase(t *testing.T, dir string) []protocol.Event {
	t.Helper()
	mains, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(mains) != 1 {
		t.Fatalf("%s: got transcripts %v, want one", dir, mains)
	}
	tl := transcript.New(mains[0], nil)
	var all []protocol.Event
	for {
		evs, _, err := tl.Poll()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if !tl.More() {
			break
		}
	}
	if s := tl.Stats(); s.Malformed > 0 || s.TooLong > 0 {
		t.Errorf("%s: %+v, want no line skipped", dir, s)
	}
	return all
}

func marshalEvents(t *testing.T, evs []protocol.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(evs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// diffLines shows the first lines where got and want differ.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\ngot  %s\nwant %s", i+1, gl, wl)
		}
	}
	return "(same lines)"
}
