package claude

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/errdefs"
)

// What scripts/probe-models reads from a Claude Code version to write its
// models table (docs/claude-code.md says why these sources):
//
//   - the /model picker lists the models by name, with each one's display
//     name, and marks the default (ParsePicker);
//   - `claude -p --model ALIAS --effort E --output-format stream-json
//     --verbose` says in its init record which id ALIAS resolved to and
//     whether a per-Turn effort is active, and warns on stderr of a name it
//     does not know (ParseProbeRun);
//   - an --effort it does not take is refused, naming those it does
//     (ParseEffortWarning).

// PickerRow is one model the /model picker offers.
type PickerRow struct {
	// Alias is the row's name lower-cased: what --model takes.
	Alias       string
	DisplayName string
}

// pickerRowRE is a row of the picker: "2. Sonnet   Sonnet 5.5 · Efficient…",
// the cursor or a tick maybe around it.
var pickerRowRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(?:❯\s*)?\d+\.\s+(.+?)(?:\s+✔)?\s{2,}(.+?)\s+·\s`)
})

// ParsePicker reads the models of the /model picker from its screen, and
// which of them the "Default (recommended)" row runs.
func ParsePicker(screen string) (rows []PickerRow, def string, err error) {
	var defName string
	for _, line := range strings.Split(screen, "\n") {
		m := pickerRowRE().FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, display := strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
		if strings.HasPrefix(name, "Default") {
			defName = display
			continue
		}
		rows = append(rows, PickerRow{Alias: strings.ToLower(name), DisplayName: display})
	}
	if len(rows) == 0 {
		return nil, "", fmt.Errorf("no model rows in the /model picker's screen: %w", errdefs.ErrInvalid)
	}
	for _, r := range rows {
		if r.DisplayName == defName {
			return rows, r.Alias, nil
		}
	}
	return nil, "", fmt.Errorf("the /model picker's default %q is none of its rows: %w", defName, errdefs.ErrInvalid)
}

// ProbeRun is what one `claude -p --output-format stream-json --verbose`
// said about its model.
type ProbeRun struct {
	// ID is the model id the init record names.
	ID string
	// EffortActive is the init record's per_turn_effort_active: the
	// model takes an effort.
	EffortActive bool
	// Unknown is whether Claude Code warned that it does not know the
	// model (and guessed its context window).
	Unknown bool
	// EffortRefused is whether it warned that --effort was not taken.
	EffortRefused bool
}

// ParseProbeRun reads a run's stdout and stderr.
func ParseProbeRun(stdout, stderr string) (ProbeRun, error) {
	run := ProbeRun{
		Unknown:       strings.Contains(stderr, "unrecognized_model") || strings.Contains(stderr, "doesn't recognize the model"),
		EffortRefused: strings.Contains(stderr, "--effort"),
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Type, Subtype string
			Model         string `json:"model"`
			EffortActive  bool   `json:"per_turn_effort_active"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Type == "system" && rec.Subtype == "init" {
			run.ID, run.EffortActive = rec.Model, rec.EffortActive
			return run, nil
		}
	}
	return ProbeRun{}, fmt.Errorf("no init record in claude -p's output (stderr %q): %w", stderr, errdefs.ErrInvalid)
}

var effortWarningRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Valid values: ([a-z, ]+)\.`) })

// ParseEffortWarning reads the efforts Claude Code names when it refuses
// an --effort it does not take.
func ParseEffortWarning(stderr string) ([]string, error) {
	m := effortWarningRE().FindStringSubmatch(stderr)
	if m == nil {
		return nil, fmt.Errorf("no list of valid efforts in %q: %w", stderr, errdefs.ErrInvalid)
	}
	return strings.Split(m[1], ", "), nil
}
