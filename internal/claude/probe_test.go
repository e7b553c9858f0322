package claude

import (
	"slices"
	"testing"
)

// picker is the /model picker of 2.1.328 as tmux captured it.
const picker = `  Select model
  Your pick is the default for new sessions. For other models, use --model.

  ❯ 1. Default (recommended) ✔  Sonnet 5.5 · Efficient for routine tasks
    2. Sonnet                   Sonnet 5.5 · Efficient for routine tasks
    3. Fable                    Fable 5.2 · Most capable for your hardest and longest-running tasks
    4. Opus                     Opus 5.5 · Best for everyday, complex tasks
    5. Haiku                    Haiku 5.5 · Fastest for quick answers

  ◐ Medium effort (default) ←/→ to adjust
`

func TestTheProbeReadsThePickersModelsAndDefault(t *testing.T) {
	rows, def, err := ParsePicker(picker)
	if err != nil {
		t.Fatal(err)
	}
	want := []PickerRow{{"sonnet", "Sonnet 5.5"}, {"fable", "Fable 5.2"}, {"opus", "Opus 5.5"}, {"haiku", "Haiku 5.5"}}
	if !slices.Equal(rows, want) || def != "sonnet" {
		t.Errorf("got %v default %q, want %v default sonnet", rows, def, want)
	}
	if _, _, err := ParsePicker("  Select model\n  ⎿  Kept model as Sonnet 5.5\n"); err == nil {
		t.Error("a screen with no rows parsed")
	}
}

func TestTheProbeReadsWhatARunResolvedAndRefused(t *testing.T) {
	init := `{"type":"system","subtype":"init","model":"claude-haiku-5-5","per_turn_effort_active":true}
{"type":"result","result":"ok"}
`
	run, err := ParseProbeRun(init, "")
	if err != nil || run != (ProbeRun{ID: "claude-haiku-5-5", EffortActive: true}) {
		t.Errorf("a known model: got %+v, %v", run, err)
	}
	unknown := `{"type":"system","subtype":"init","model":"nosuch","per_turn_effort_active":false}`
	stderr := "Warning: Unknown --effort value 'bogus' — ignoring it and using the default effort. Valid values: low, medium, high, xhigh, max.\n" +
		`[claude-code:unrecognized_model] {"model":"nosuch","query_source":"sdk"}` + "\n"
	run, err = ParseProbeRun(unknown, stderr)
	if err != nil || run != (ProbeRun{ID: "nosuch", Unknown: true, EffortRefused: true}) {
		t.Errorf("an unknown model and effort: got %+v, %v", run, err)
	}
	if efforts, err := ParseEffortWarning(stderr); err != nil || !slices.Equal(efforts, Efforts) {
		t.Errorf("ParseEffortWarning: got %v, %v; want %v", efforts, err, Efforts)
	}
	if _, err := ParseProbeRun("error: no such option\n", ""); err == nil {
		t.Error("a run with no init record parsed")
	}
}
