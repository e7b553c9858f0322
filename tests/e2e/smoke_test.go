package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// The smoke test a Claude Code version passes before it is pinned
// (scripts/smoke VERSION, scripts/pin-claude VERSION), which CI runs on the
// pinned one: the spec's "its banner names the plan, /status answers, a
// Turn runs a Bash command, and the build takes the models the Runner
// offers", and what the mod and the Runner's prompt delivery rely on.

// smokeTarget is the version under test and its table: the pinned one,
// or KNDL_CLAUDE_VERSION and the table its probe wrote to
// KNDL_CLAUDE_MODELS (scripts/smoke sets both).
func smokeTarget(t *testing.T) (claude.Pin, claude.Table) {
	t.Helper()
	pin := targetPin(t)
	if pin.Version == claude.Version {
		return pin, claude.Models()
	}
	path := os.Getenv("KNDL_CLAUDE_MODELS")
	if path == "" {
		t.Fatalf("KNDL_CLAUDE_VERSION=%s needs KNDL_CLAUDE_MODELS, the table its probe wrote (scripts/probe-models %s)", pin.Version, pin.Version)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	table, err := claude.ParseTable(data)
	if err != nil {
		t.Fatal(err)
	}
	if table.Version != pin.Version {
		t.Fatalf("%s is the table of %s, not %s", path, table.Version, pin.Version)
	}
	return pin, table
}

// targetPin is the pinned version, or KNDL_CLAUDE_VERSION with the
// integrity npm's registry gives for both its builds.
func targetPin(t *testing.T) claude.Pin {
	t.Helper()
	version := os.Getenv("KNDL_CLAUDE_VERSION")
	if version == "" || version == claude.Version {
		return claude.Pinned()
	}
	pin, err := claude.PinFromRegistry(t.Context(), version, claude.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pin
}

// smokeHooks are the mod's hooks a Turn with a tool must fire.
var smokeHooks = []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"}

// smokePlan is the plan the banner names against the fake Anthropic. With
// CLAUDE_CODE_OAUTH_TOKEN Claude Code asks Anthropic for no profile (it
// takes the plan from CLAUDE_CODE_SUBSCRIPTION_TYPE, which kndl never
// sets) and names the plan "Claude API"; docs/claude-code.md.
const smokePlan = "Claude API"

// It runs beside the others: the Runner that once did not connect beside
// the probe's had been handed an overlapping relay port, which
// testkit.Ports now claims host-wide.
func TestThePinnedClaudeCodePassesTheSmokeTest(t *testing.T) {
	t.Parallel()
	pin, table := smokeTarget(t)
	start := time.Now()
	s := Start(t, WithClaude(pin), WithModels(table))

	// A Turn runs a Bash command, and its output reaches the transcript.
	marker := "kndl-smoke-" + testkit.NewUUID()[:8]
	s.Model.On(testkit.PromptContains("run the smoke command"), testkit.Bash("echo "+marker))
	s.Model.On(testkit.ToolResultContains(marker), testkit.Text("The command printed "+marker+"."))
	v := s.NewSession(s.Repo(), "run the smoke command")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the Bash command's output in the transcript", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && strings.Contains(e.Text, marker) && !e.IsError
	})
	s.turnEnds(v.ID, 1)
	t.Logf("the first Turn ended %v after the start", time.Since(start))

	// The banner, at the top until later Turns scroll it away, names the
	// version, the default model and the plan.
	def, _ := table.Default()
	banner := def.DisplayName + " · " + smokePlan
	if pane := s.pane(v.ID); !strings.Contains(pane, "Claude Code v"+pin.Version) || !strings.Contains(pane, banner) {
		t.Errorf("the banner does not name Claude Code v%s and %q:\n%s", pin.Version, banner, pane)
	}

	// Prompts arrive byte for byte, or changed only as Claude Code is known
	// to change them, with a note.
	var cases []promptCase
	for _, c := range promptCases() {
		if c.name == "tabs" || c.name == "CR and CRLF" || c.name == "64 KiB" {
			cases = append(cases, c)
		}
	}
	s.promptsArrive(t, v.ID, 2, cases)

	// /status answers, naming the version and the token Claude Code runs on.
	s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: "/status", IsCommand: true}, nil)
	// Queued behind the Turns before it, as any prompt: on a loaded host
	// (CI's 2 cores) the wait was seen past 5 s.
	var pane string
	statusAnswers := func() bool {
		pane = s.pane(v.ID)
		return regexp.MustCompile(`Version:\s+`+regexp.QuoteMeta(pin.Version)).MatchString(pane) &&
			regexp.MustCompile(`Auth token:\s+CLAUDE_CODE_OAUTH_TOKEN`).MatchString(pane)
	}
	testenv.EventuallyShowing(t, testenv.WaitMedium, statusAnswers, func() string {
		return "/status answers; the screen:\n" + pane
	})
	s.inSandbox(v.ID, "tmux -S /run/kndl/tmux.sock send-keys -t claude Escape")

	if missing := s.hooksMissing(v.ID, smokeHooks); len(missing) > 0 {
		t.Errorf("the mod's hooks %v never fired", missing)
	}

	// Each model of the table is taken for one Turn.
	if err := s.modelsTaken(table); err != nil {
		t.Error(err)
	}

	muslRunsABashTool(t, s.Home, pin)
	t.Logf("the smoke test of %s took %v", pin.Version, time.Since(start))
}

// TestTheSmokeTestFailsOnATableTheBuildDoesNotMatch: a table whose model
// resolves to another id than the build sends, or whose alias the build
// does not know, fails the smoke test's model step.
func TestTheSmokeTestFailsOnATableTheBuildDoesNotMatch(t *testing.T) {
	t.Parallel()
	def, _ := claude.Models().Default()
	wrongID, unknown := def, def
	wrongID.ID = "claude-not-what-it-resolves-to"
	unknown.Alias, unknown.ID, unknown.Default = "no-such-alias", "claude-no-such-model", false
	broken := claude.Table{Version: claude.Version, Models: []claude.Model{wrongID, unknown}}
	// The Runner offers the table under test, as a candidate's does, so
	// the Hub lets each model through to Claude Code.
	s := Start(t, WithModels(broken))
	err := s.modelsTaken(broken)
	if err == nil {
		t.Fatal("a broken table passed the smoke test's model step")
	}
	for _, want := range []string{def.Alias + " ran as " + def.ID + ", want claude-not-what-it-resolves-to",
		"no-such-alias: Claude Code does not know it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure %q does not say %q", err, want)
		}
	}
}

// hooksMissing returns those of hooks the Runner never had from the
// Session's mod.
func (s *System) hooksMissing(id string, hooks []string) []string {
	log := s.logText()
	var missing []string
	for _, h := range hooks {
		if !strings.Contains(log, fmt.Sprintf("session=%s hook=%s", id, h)) {
			missing = append(missing, h)
		}
	}
	return missing
}

// modelsTaken starts a Session for each model of table, with its highest
// effort, all at once, and checks that each one's first Turn reached the
// model as the table says: its id and the effort, from a model Claude Code
// knows.
func (s *System) modelsTaken(table claude.Table) error {
	s.t.Helper()
	ids := map[string]string{}
	for _, m := range table.Models {
		s.Model.On(testkit.PromptContains(modelPrompt(m)), testkit.Text("model "+m.Alias+" answers"))
		var v api.SessionView
		s.Do(http.MethodPost, "/api/sessions", api.NewSession{Repo: s.Repo(), Prompt: modelPrompt(m), Model: m.Alias, Effort: highest(m)}, &v)
		ids[m.Alias] = v.ID
	}
	var errs []error
	for _, m := range table.Models {
		s.WaitEvent(ids[m.Alias], testenv.WaitBuild, "the Turn of model "+m.Alias, kind(protocol.EventTurnEnd))
		errs = append(errs, s.modelTaken(m))
	}
	return errors.Join(errs...)
}

func modelPrompt(m claude.Model) string { return "smoke test of model " + m.Alias }

// highest is the highest effort m takes, or none.
func highest(m claude.Model) string {
	if len(m.Efforts) == 0 {
		return ""
	}
	return m.Efforts[len(m.Efforts)-1]
}

// modelTaken checks the request that answered m's smoke prompt.
func (s *System) modelTaken(m claude.Model) error {
	for _, r := range s.Model.Turns() {
		if !testkit.PromptContains(modelPrompt(m))(r) {
			continue
		}
		var body struct {
			OutputConfig struct {
				Effort string `json:"effort"`
			} `json:"output_config"`
		}
		json.Unmarshal(r.Body, &body)
		switch {
		// Claude Code sends a name it does not know as it is.
		case r.Params.Model == m.Alias && m.Alias != m.ID:
			return fmt.Errorf("%s: Claude Code does not know it (it sent the alias to the model as it was)", m.Alias)
		case r.Params.Model != m.ID:
			return fmt.Errorf("%s ran as %s, want %s", m.Alias, r.Params.Model, m.ID)
		case highest(m) != "" && body.OutputConfig.Effort != highest(m):
			return fmt.Errorf("%s with --effort %s asked the model for effort %q", m.Alias, highest(m), body.OutputConfig.Effort)
		}
		return nil
	}
	return fmt.Errorf("%s: its Turn ended with no request to the model", m.Alias)
}

// muslLoader is what Debian's musl package installs, and what the musl
// build names as its interpreter.
const muslLoader = "/lib/ld-musl-x86_64.so.1"

// muslRunsABashTool installs the musl build of pin as the Runner would for
// a musl image, and runs a Turn with a Bash tool on it. There is no musl
// image here to build a Sandbox from (the test image is Debian's), so it
// runs on this host, on Debian's musl loader and C library: all the build
// links against.
func muslRunsABashTool(t *testing.T, home string, pin claude.Pin) {
	t.Helper()
	if _, err := os.Stat(muslLoader); err != nil {
		testenv.Lack(t, "Debian's musl package ("+muslLoader+")")
		return
	}
	bin, err := claude.Install(t.Context(), filepath.Join(home, "claude-code"), claude.Musl, claude.InstallOptions{Pin: pin})
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.NewClaude(t, bin)
	made := filepath.Join(c.Work, "made-by-musl")
	c.API.On(testkit.PromptContains("musl smoke"), testkit.Bash("echo musl > "+made))
	c.API.On(testkit.AfterToolResult(), testkit.Text("done on musl"))
	argv, env := c.Command(false)
	cmd := exec.CommandContext(t.Context(), argv[0], append(argv[1:], "-p", "musl smoke")...)
	cmd.Dir, cmd.Env = c.Work, env
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "done on musl" {
		t.Fatalf("the musl build's claude -p: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(made); err != nil || string(got) != "musl\n" {
		t.Errorf("the musl build's Bash tool made %q, %v", got, err)
	}
}
