package claude

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
)

// Model is one model the pinned Claude Code offers, as its probe read it
// (scripts/probe-models): what --model and --effort may be.
type Model struct {
	// Alias is the name the /model picker lists it by ("sonnet"), which
	// --model takes and which follows the latest of its family.
	Alias string `json:"alias"`
	// ID is the model id the alias resolves to in this version.
	ID string `json:"id"`
	// DisplayName is what Claude Code shows for it ("Sonnet 5.5").
	DisplayName string `json:"display_name"`
	// Efforts are the --effort values it takes, lowest first; none when
	// the model takes no effort.
	Efforts []string `json:"efforts"`
	// Default is whether Claude Code runs it with no --model.
	Default bool `json:"default,omitempty"`
}

// Table is the models of one Claude Code version, as checked in beside
// the pin (models.json).
type Table struct {
	// Version is the Claude Code version the probe read it from.
	Version string  `json:"version"`
	Models  []Model `json:"models"`
}

//go:embed models.json
var modelsJSON []byte

// pinnedModels is the table of Version; a test checks it parses and
// names Version.
var pinnedModels = mustTable(modelsJSON)

func mustTable(data []byte) Table {
	t, err := ParseTable(data)
	if err != nil {
		panic("internal/claude/models.json: " + err.Error())
	}
	return t
}

// Models returns the models the pinned Version offers, the default first
// as the probe listed them.
func Models() Table { return pinnedModels.clone() }

// LookupModel finds a model of the pinned Version by its alias or its id.
func LookupModel(name string) (Model, bool) { return pinnedModels.Lookup(name) }

// Lookup finds a model by its alias or its id.
func (t Table) Lookup(name string) (Model, bool) {
	for _, m := range t.Models {
		if m.Alias == name || m.ID == name {
			return m.clone(), true
		}
	}
	return Model{}, false
}

// Default is the model Claude Code runs with no --model.
func (t Table) Default() (Model, bool) {
	for _, m := range t.Models {
		if m.Default {
			return m.clone(), true
		}
	}
	return Model{}, false
}

// TakesEffort reports whether --effort effort is taken with m.
func (m Model) TakesEffort(effort string) bool { return slices.Contains(m.Efforts, effort) }

// ParseTable reads a table and checks it: a version, each model with an
// alias, an id and a display name, no alias or id twice, efforts Claude
// Code knows (Efforts), and exactly one default.
func ParseTable(data []byte) (Table, error) {
	var t Table
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Table{}, fmt.Errorf("read the models table: %w: %w", err, errdefs.ErrInvalid)
	}
	return t, t.Check()
}

// Check checks a table as ParseTable does: one a Runner reports in its
// hello, or the probe wrote.
func (t Table) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("the models table of %q: %s: %w", t.Version, fmt.Sprintf(format, args...), errdefs.ErrInvalid)
	}
	if t.Version == "" {
		return bad("no version")
	}
	if len(t.Models) == 0 {
		return bad("no models")
	}
	seen, defaults := map[string]bool{}, 0
	for i, m := range t.Models {
		if m.Alias == "" || m.ID == "" || m.DisplayName == "" {
			return bad("model %d lacks an alias, id or display name: %+v", i, m)
		}
		for _, name := range slices.Compact([]string{m.Alias, m.ID}) {
			if seen[name] {
				return bad("%q names two models", name)
			}
			seen[name] = true
		}
		for _, e := range m.Efforts {
			if !slices.Contains(Efforts, e) {
				return bad("%s takes effort %q, which is none of %s", m.Alias, e, strings.Join(Efforts, ", "))
			}
		}
		if m.Default {
			defaults++
		}
	}
	if defaults != 1 {
		return bad("%d default models, want one", defaults)
	}
	return nil
}

// Common is what every one of tables offers: each model whose alias
// resolves to the same id in all of them, with the efforts all of them
// take, and the default where it is every table's default. Its Version is
// theirs when they agree, "" when not; with no tables it offers nothing.
func Common(tables []Table) Table {
	if len(tables) == 0 {
		return Table{}
	}
	out := tables[0].clone()
	out.Models = slices.DeleteFunc(out.Models, func(m Model) bool {
		for _, t := range tables[1:] {
			o, ok := t.Lookup(m.Alias)
			if !ok || o.ID != m.ID {
				return true
			}
		}
		return false
	})
	for i := range out.Models {
		m := &out.Models[i]
		for _, t := range tables[1:] {
			o, _ := t.Lookup(m.Alias)
			m.Efforts = slices.DeleteFunc(m.Efforts, func(e string) bool { return !o.TakesEffort(e) })
			m.Default = m.Default && o.Default
		}
	}
	if slices.ContainsFunc(tables, func(t Table) bool { return t.Version != out.Version }) {
		out.Version = ""
	}
	return out
}

// Takes checks that a Session of model and effort runs on what t offers:
// model is "" (Claude Code's default) or an alias or id in t, and effort
// is "" or one the model takes (the default model's, for model ""). Its
// error names what they may be.
func (t Table) Takes(model, effort string) error {
	m, ok := t.Default()
	if model != "" {
		if m, ok = t.Lookup(model); !ok {
			return fmt.Errorf("model %q is not offered: use %s: %w", model, t.names(), errdefs.ErrInvalid)
		}
	}
	switch {
	case effort == "":
		return nil
	case !ok && slices.Contains(Efforts, effort):
		return nil // no default the Runners agree on: Claude Code's own takes it or warns
	case !ok:
		return fmt.Errorf("effort %q: use %s, or \"\" for the model's default: %w", effort, strings.Join(Efforts, ", "), errdefs.ErrInvalid)
	case len(m.Efforts) == 0:
		return fmt.Errorf("model %s takes no effort: leave the effort to its default: %w", m.Alias, errdefs.ErrInvalid)
	case !m.TakesEffort(effort):
		return fmt.Errorf("effort %q: model %s takes %s, or \"\" for its default: %w", effort, m.Alias, strings.Join(m.Efforts, ", "), errdefs.ErrInvalid)
	}
	return nil
}

// names lists what a model may be: each model's alias with its id, and
// "" for the default.
func (t Table) names() string {
	var out []string
	for _, m := range t.Models {
		out = append(out, fmt.Sprintf("%s (%s)", m.Alias, m.ID))
	}
	return strings.Join(append(out, `"" for the default`), ", ")
}

// Marshal is the table as the probe writes it: indented JSON with a final
// newline, so a moved pin's diff reads line by line.
func (t Table) Marshal() ([]byte, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	return append(b, '\n'), err
}

func (t Table) clone() Table {
	out := Table{Version: t.Version}
	for _, m := range t.Models {
		out.Models = append(out.Models, m.clone())
	}
	return out
}

func (m Model) clone() Model {
	m.Efforts = slices.Clone(m.Efforts)
	return m
}
