package e2e

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestAForkOfAnAsleepSessionHasItsFilesAndConversationAndTheParentGoesOn:
// kndl fork of an asleep Session with a prompt starts a new Session whose
// Workspace and disks hold the parent's files and whose Claude Code
// resumes the parent's conversation (the model gets the parent's prompt
// again); its history begins with the note naming the parent, its start
// log says how the Runner copied, and none of the parent's Events are
// read into it. git's objects are shared by hard link. What the fork
// writes stays its own, and the parent wakes into its own conversation,
// which holds nothing of the fork's. It is the test of a Bash Turn too:
// the parent's first Turn shows its Bash call and result paired, then
// Claude's answer; the fork's Bash writes a file its Workspace on the host
// holds (on gVisor, through the gofer), and runs with Bun's JIT switch,
// which Claude Code's own process has, unset. And of sleep and wake: the
// asleep parent's Sandbox is stopped and stop-turn refused, and a prompt
// wakes it into the same conversation with both disks, its Workspace on
// the host as it was.
func TestAForkOfAnAsleepSessionHasItsFilesAndConversationAndTheParentGoesOn(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.withNote()
	// A Session started with a prompt: its Turn's Bash call and result
	// paired in the transcript, then Claude's answer.
	evs := s.Events(v.ID)
	if got, want := kinds(evs, protocol.EventPrompt, protocol.EventToolUse, protocol.EventToolResult, protocol.EventText), []string{"prompt", "tool_use:Bash", "tool_result", "text"}; !slices.Equal(got, want) {
		t.Fatalf("the parent's transcript = %v, want %v\n%s", got, want, dump(evs))
	}
	pairedTool(t, evs, "note.txt")
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: got %d, want 204", code)
	}
	if got := s.state(v.ID); got.State != api.Asleep {
		t.Fatalf("the parent after the sleep: %s, want asleep", got.State)
	}
	if st, err := s.Backend.Status(context.Background(), "s-"+v.ID); err != nil || st.State != sandbox.StateStopped {
		t.Fatalf("the parent's Sandbox after the sleep: %+v, %v; want it stopped", st, err)
	}
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/stop-turn", nil, nil); code != http.StatusConflict {
		t.Fatalf("stop-turn on the asleep parent: %d, want 409", code)
	}
	before := len(s.Events(v.ID))

	s.Model.On(testkit.PromptContains("what did the parent write"), testkit.Bash(`cat /workspace/note.txt /var/cache/kndl/c.txt; echo mine > /workspace/fork.txt; echo "dfg=${BUN_JSC_useDFGJIT-unset}" >> /workspace/fork.txt`))
	var f api.Fork
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/fork", api.NewFork{Prompt: "what did the parent write?"}, &f); code != http.StatusCreated {
		t.Fatalf("fork: got %d, want 201", code)
	}
	if f.ParentID != v.ID || f.Turn != 1 || f.SessionID == "" {
		t.Fatalf("the fork: got %+v, want a fork of %s at Turn 1", f, v.ID)
	}
	s.WaitEvent(f.SessionID, testenv.WaitBuild, "the fork's tool output", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && e.Text == "kept\ncached"
	})
	if !lastRequestHas(s.Model, "write the note") {
		t.Fatal("the fork's Claude Code did not resume the parent's conversation: the model did not get its first prompt again")
	}
	s.turnEnds(f.SessionID, 1)

	evs = s.Events(f.SessionID)
	if len(evs) == 0 || evs[0].Kind != protocol.EventNote || !strings.Contains(evs[0].Text, "Forked from Session "+v.ID) || !strings.Contains(evs[0].Text, "Turn 1") {
		t.Fatalf("the fork's history does not begin with the note naming its parent and Turn:\n%s", dump(evs))
	}
	var copied bool
	prompts := 0
	for _, e := range evs {
		copied = copied || (e.Kind == protocol.EventLog && strings.HasPrefix(e.Text, "Forked from Session "+v.ID) && (strings.Contains(e.Text, "by reflink") || strings.Contains(e.Text, "by plain copy")))
		if e.Kind == protocol.EventPrompt {
			prompts++
		}
	}
	if !copied || prompts != 1 {
		t.Fatalf("the fork's history: got copy line %v and %d prompts, want its start log to say how it was copied and only its own prompt:\n%s", copied, prompts, dump(evs))
	}
	if f.How == "" {
		t.Errorf("the fork's answer does not say how it was copied")
	}
	pairedTool(t, evs, "fork.txt")

	parentWS, forkWS := filepath.Join(s.Home, "sessions", v.ID, "workspace"), filepath.Join(s.Home, "sessions", f.SessionID, "workspace")
	if !sharesAGitObject(parentWS, forkWS) {
		t.Errorf("no git object of the fork's Workspace is a hard link to the parent's")
	}
	// Claude Code in its Sandbox runs with Bun's optimizing JIT off, a
	// quarter less CPU (docs/claude-code.md); the model's commands run
	// with it on, as on a laptop: the Bash wrote dfg=unset.
	if b, err := os.ReadFile(filepath.Join(forkWS, "fork.txt")); err != nil || string(b) != "mine\ndfg=unset\n" {
		t.Errorf("the fork's Workspace's fork.txt = %q, %v; want what its Bash wrote, with Bun's JIT switch unset", b, err)
	}
	// A process may end between the glob and its read (a hook's, say).
	if out, _ := s.Exec(f.SessionID, "sh", "-c", `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = claude ] && tr '\0' '\n' < $p/environ 2>/dev/null | grep BUN_JSC; done`); strings.TrimSpace(out) != "BUN_JSC_useDFGJIT=0" {
		t.Errorf("Claude Code's environment holds %q, want BUN_JSC_useDFGJIT=0", out)
	}
	if _, err := os.Stat(filepath.Join(parentWS, "fork.txt")); !os.IsNotExist(err) {
		t.Errorf("the fork's file in the parent's Workspace: got %v, want none", err)
	}
	if got := s.state(v.ID); got.State != api.Asleep || len(s.Events(v.ID)) != before {
		t.Fatalf("the parent: got %s with %d Events, want it asleep with its %d", got.State, len(s.Events(v.ID)), before)
	}

	s.noteKept(v.ID)
	if b, _ := os.ReadFile(filepath.Join(parentWS, "note.txt")); string(b) != "kept\n" {
		t.Fatalf("the parent's Workspace after its wake: note.txt = %q", b)
	}
	if lastRequestHas(s.Model, "what did the parent write") {
		t.Fatal("the parent's conversation holds the fork's prompt")
	}
}

// sharesAGitObject reports whether a file under b's .git/objects is the
// same file as a's at the same path.
func sharesAGitObject(a, b string) bool {
	shared := false
	filepath.WalkDir(filepath.Join(b, ".git", "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || shared {
			return nil
		}
		rel, _ := filepath.Rel(b, p)
		x, err1 := os.Stat(p)
		y, err2 := os.Stat(filepath.Join(a, rel))
		shared = err1 == nil && err2 == nil && os.SameFile(x, y)
		return nil
	})
	return shared
}
