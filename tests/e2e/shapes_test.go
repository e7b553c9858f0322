package e2e

import (
	"bytes"
	"crypto/rand"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestCredentialsNobodyRegisteredAreMaskedByShape: Claude reads a file of
// the Repo holding a fresh Slack bot token and a GitHub token, which no
// Variable holds, and says them again; the transcript (tool output and
// Claude's text) and the terminal's frames show each masked with the mark
// of the rule that found it.
func TestCredentialsNobodyRegisteredAreMaskedByShape(t *testing.T) {
	t.Parallel()
	s := Start(t)
	slack := "xoxb-" + randomOf("0123456789", 12) + "-" + randomOf("0123456789", 13) + "-" + randomOf(alnum, 24)
	github := "ghp_" + randomOf(alnum, 36)
	repo := s.Repo()
	env := "SLACK_BOT_TOKEN=" + slack + "\nGITHUB_TOKEN=" + github + "\nREGION=eu-north-1\n"
	if err := os.WriteFile(filepath.Join(repo, "creds.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "creds.env"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "creds"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}

	s.Model.On(testkit.PromptContains("read creds.env"), testkit.Bash("cat creds.env"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("The Slack token:\n\n"+slack+"\n\nThe GitHub token:\n\n"+github+"\n\nThat is all."))
	v := s.NewSession(repo, "read creds.env")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && strings.Contains(e.Text, "That is all")
	})

	result, text := s.lastResultAndText(v.ID)
	wantResult := "SLACK_BOT_TOKEN=[masked: slack-bot-token]\nGITHUB_TOKEN=[masked: github-pat]\nREGION=eu-north-1"
	if strings.TrimSpace(result.Text) != wantResult {
		t.Errorf("tool output = %q, want %q", result.Text, wantResult)
	}
	if strings.Contains(text.Text, slack) || strings.Contains(text.Text, github) ||
		!strings.Contains(text.Text, "[masked: slack-bot-token]") || !strings.Contains(text.Text, "[masked: github-pat]") {
		t.Errorf("Claude's text = %q, want both tokens masked with their rules' marks", text.Text)
	}

	// The terminal shows Claude Code's screen with the answer on it; each
	// token is masked in its own width.
	screen := terminalBytes(t, s, v.ID, "That is all")
	if bytes.Contains(screen, []byte(slack)) || bytes.Contains(screen, []byte(github)) ||
		bytes.Contains(screen, []byte(slack[5:17])) || bytes.Contains(screen, []byte(github[4:16])) {
		t.Errorf("a terminal frame holds a token, or part of one")
	}
	for _, mark := range []string{"[masked: slack-bot-token]", "[masked: github-pat]"} {
		if !bytes.Contains(screen, []byte(mark)) {
			t.Errorf("the terminal lacks %s; it showed:\n%s", mark, screen)
		}
	}
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomOf is n characters of alphabet, at random: a token nobody has seen.
func randomOf(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}
