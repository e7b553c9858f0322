package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"

	"golang.org/x/sync/errgroup"
)

// TestTheProbeOfThePinnedVersionReadsTheCheckedInTable runs the probe
// scripts/probe-models runs: in a Session's Sandbox, the version's /model
// picker and one `claude -p` per model and effort. Of the pinned version it
// must read the table checked in; with KNDL_PROBE_WRITE it writes what it
// read there instead (scripts/probe-models VERSION).
func TestTheProbeOfThePinnedVersionReadsTheCheckedInTable(t *testing.T) {
	t.Parallel()
	pin := targetPin(t)
	s := Start(t, WithClaude(pin))
	s.Model.On(testkit.PromptContains("probe"), testkit.Text("probed"))
	v := s.Ready("probe the models", "probed")

	s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: "/model", IsCommand: true}, nil)
	// Queued behind the Turn before it, as any prompt (and /status in the
	// smoke test): on a loaded host it was seen past 5 s.
	var rows []claude.PickerRow
	var def, pane string
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		var err error
		pane = s.pane(v.ID)
		rows, def, err = claude.ParsePicker(pane)
		return err == nil
	}, func() string { return "the /model picker; the screen:\n" + pane })
	s.inSandbox(v.ID, "tmux -S /run/kndl/tmux.sock send-keys -t claude Escape")

	environ, err := claudeEnviron(t, s, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	warn, err := s.probeRun(v.ID, env, def, "no-such-effort")
	if err != nil {
		t.Fatal(err)
	}
	efforts, err := claude.ParseEffortWarning(warn.stderr)
	if err != nil {
		t.Fatal(err)
	}
	// One run per model and effort, probeAtOnce at a time: each is a
	// Claude Code start, mostly waiting, and one after another they were
	// most of this test's 30 s.
	runs := make([][]probeOutput, len(rows))
	var g errgroup.Group
	g.SetLimit(probeAtOnce)
	for i, row := range rows {
		runs[i] = make([]probeOutput, len(efforts))
		for j, e := range efforts {
			g.Go(func() (err error) {
				runs[i][j], err = s.probeRun(v.ID, env, row.Alias, e)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	got := claude.Table{Version: pin.Version}
	for i, row := range rows {
		m := claude.Model{Alias: row.Alias, DisplayName: row.DisplayName, Default: row.Alias == def}
		for j, e := range efforts {
			out := runs[i][j]
			run, err := claude.ParseProbeRun(out.stdout, out.stderr)
			if err != nil {
				t.Fatal(err)
			}
			if run.Unknown {
				t.Fatalf("the picker offers %s, but claude -p --model %s does not know it: %s", row.Alias, row.Alias, out.stderr)
			}
			m.ID = run.ID
			if run.EffortActive && !run.EffortRefused {
				m.Efforts = append(m.Efforts, e)
			}
		}
		got.Models = append(got.Models, m)
	}
	data, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("KNDL_PROBE_WRITE"); path != "" {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote the table of %s to %s", pin.Version, path)
		return
	}
	if _, want := smokeTarget(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("the probe of %s read\n%s\nbut the table checked in differs: run scripts/pin-claude %s", pin.Version, data, pin.Version)
	}
}

type probeOutput struct{ stdout, stderr string }

// probeAtOnce is how many probe runs share the Sandbox at a time.
const probeAtOnce = 3

// probeRun runs one `claude -p` in the Session's Sandbox with env, a new
// conversation each time, in /tmp: not in the Session's clone, a git
// repository (one run alone took 1.02 s in /tmp against 1.13 s there, six
// of each), whose project's conversations these would join. It may run
// beside others, so it returns its failure instead of ending the test.
func (s *System) probeRun(id string, env []string, model, effort string) (probeOutput, error) {
	var stdout, stderr bytes.Buffer
	p, err := s.Backend.Exec(context.Background(), "s-"+id, sandbox.Cmd{
		Args: []string{claude.MountDir + "/claude", "-p", "probe", "--session-id", testkit.NewUUID(),
			"--model", model, "--effort", effort, "--output-format", "stream-json", "--verbose"},
		Env: env, Dir: "/tmp", Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return probeOutput{}, err
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		return probeOutput{}, fmt.Errorf("claude -p --model %s --effort %s: exit %d, %v\n%s\n%s", model, effort, code, err, stdout.String(), stderr.String())
	}
	return probeOutput{stdout.String(), stderr.String()}, nil
}
