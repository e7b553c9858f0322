package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheEditorScriptPutsTheStagedPromptInTheFile: the editor Claude Code
// runs at Ctrl+G, run as Claude Code runs it (VISUAL split at spaces, the
// file last), writes the staged prompt over the file byte for byte, up to
// 64 KiB and in every plane, and with nothing staged leaves the file as it
// is and succeeds.
func TestTheEditorScriptPutsTheStagedPromptInTheFile(t *testing.T) {
	dir := t.TempDir()
	editor := filepath.Join(dir, editorName)
	if err := os.WriteFile(editor, []byte(editorScript), 0o755); err != nil {
		t.Fatal(err)
	}
	staged, file := filepath.Join(dir, stagedPrompt), filepath.Join(dir, "claude prompt.md")
	run := func() {
		t.Helper()
		visual := strings.Fields(strings.TrimPrefix(strings.ReplaceAll(editorEnv, modDir+"/"+stagedPrompt, staged), "VISUAL="))
		visual[0] = editor
		if out, err := exec.Command(visual[0], append(visual[1:], file)...).CombinedOutput(); err != nil {
			t.Fatalf("the editor failed: %v %s", err, out)
		}
	}
	os.WriteFile(file, []byte("what Claude Code had"), 0o600)
	run()
	if b, _ := os.ReadFile(file); string(b) != "what Claude Code had" {
		t.Fatalf("with nothing staged the file holds %q, want it unchanged", b)
	}
	prompt := "-n a\ttab, e\u0301, 𝄞 😀 👨\u200d👩\u200d👧, \U000E0067, CR LF\r\n trailing  \n" + strings.Repeat("x\u00e9\u4e2d", 64<<10/6)
	os.WriteFile(staged, []byte(prompt), 0o600)
	run()
	if b, _ := os.ReadFile(file); string(b) != prompt {
		t.Fatalf("the file holds %d bytes, want the %d staged exactly", len(b), len(prompt))
	}
}
