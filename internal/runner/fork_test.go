package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAForkAdoptsTheConversationUnderItsOwnIDWithoutFollowingALink: the
// copied transcript and its subagents' files come under the fork's id,
// the parent's id written as the fork's, each offset just past the last
// complete line; a conversation dir that is a link the Sandbox made is
// not followed (its target stays as it was), and no conversation at all
// is no error.
func TestAForkAdoptsTheConversationUnderItsOwnIDWithoutFollowingALink(t *testing.T) {
	const from, to = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	line := `{"sessionId":"` + from + `","type":"user"}` + "\n"
	t.Run("adopted", func(t *testing.T) {
		dir := t.TempDir()
		proj := filepath.Join(dir, "projects", "-workspace")
		os.MkdirAll(filepath.Join(proj, from, "subagents"), 0o700)
		os.WriteFile(filepath.Join(proj, from+".jsonl"), []byte(line+line+`{"partial`), 0o600)
		os.WriteFile(filepath.Join(proj, from, "subagents", "agent-a1.jsonl"), []byte(line), 0o600)
		offsets, err := adoptConversation(dir, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{to + ".jsonl": int64(2 * len(line)), to + "/subagents/agent-a1.jsonl": int64(len(line))}
		if len(offsets) != len(want) || offsets[to+".jsonl"] != want[to+".jsonl"] || offsets[to+"/subagents/agent-a1.jsonl"] != want[to+"/subagents/agent-a1.jsonl"] {
			t.Errorf("got offsets %v, want %v", offsets, want)
		}
		b, err := os.ReadFile(filepath.Join(proj, to+".jsonl"))
		if err != nil || strings.Contains(string(b), from) || !strings.Contains(string(b), to) {
			t.Errorf("the fork's transcript: got %q (%v), want the parent's with the fork's id", b, err)
		}
		if _, err := os.Stat(filepath.Join(proj, from+".jsonl")); !os.IsNotExist(err) {
			t.Errorf("the parent's name: got %v, want it gone from the fork's copy", err)
		}
	})
	t.Run("a link is not followed", func(t *testing.T) {
		dir, elsewhere := t.TempDir(), t.TempDir()
		os.MkdirAll(filepath.Join(elsewhere, "-workspace"), 0o700)
		target := filepath.Join(elsewhere, "-workspace", from+".jsonl")
		os.WriteFile(target, []byte(line), 0o600)
		os.Symlink(elsewhere, filepath.Join(dir, "projects"))
		if _, err := adoptConversation(dir, from, to); err == nil {
			t.Errorf("got no error, want the link refused")
		}
		if b, _ := os.ReadFile(target); string(b) != line {
			t.Errorf("the link's target: got %q, want it untouched", b)
		}
	})
	t.Run("no conversation", func(t *testing.T) {
		if offsets, err := adoptConversation(t.TempDir(), from, to); err != nil || offsets != nil {
			t.Errorf("got %v, %v, want no offsets and no error", offsets, err)
		}
	})
}
