package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/transcript"
)

// TestHostedRunsBothJobsWhereInitDoesNot: `kndl hosted A -- B` where no
// init takes hand-offs (no socket) runs both jobs itself, the first
// writing to stdout and the second to stderr, until stdin closes. (Where
// an init takes them, it writes to the same pipes.)
func TestHostedRunsBothJobsWhereInitDoesNot(t *testing.T) {
	config, conv := t.TempDir(), "0b5a4c3e-8f1d-4e2a-9c6b-7d8e9f0a1b2c"
	path := claude.TranscriptPath(config, "/workspace", conv)
	os.MkdirAll(filepath.Dir(path), 0o700)
	line := `{"type":"user","message":{"role":"user","content":"hello"},"timestamp":"2026-11-30T09:02:10.618Z","origin":{"kind":"human"}}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	ret := make(chan error, 1)
	go func() {
		ret <- hostedPair(context.Background(), IO{Stdin: inR, Stdout: outW, Stderr: errW}, []string{
			"transcript", "follow", "--config-dir", config, "--cwd", "/workspace", "--conversation", conv,
			"--", "ports", "watch", "--skip-exe", "/opt/none"})
	}()
	batch, err := transcript.NewDecoder(outR).Next()
	if err != nil || len(batch.Events) == 0 || batch.Events[len(batch.Events)-1].Kind != protocol.EventPrompt {
		t.Fatalf("stdout: %+v, %v; want the prompt's Event", batch, err)
	}
	list, err := bufio.NewReader(errR).ReadString('\n')
	var ports []protocol.Port
	if err != nil || json.Unmarshal([]byte(list), &ports) != nil {
		t.Fatalf("stderr: %q, %v; want the ports watcher's list", list, err)
	}
	inW.Close()
	select {
	case err := <-ret:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after stdin closed")
	}
}

func TestHostedRefusesWhatIsNotTwoHostedJobs(t *testing.T) {
	for _, args := range [][]string{
		{"transcript", "follow"},
		{"transcript", "follow", "--", "claude", "seed"},
		{"ports", "--", "ports", "watch"},
	} {
		err := hostedPair(context.Background(), IO{Stderr: &strings.Builder{}}, args)
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
