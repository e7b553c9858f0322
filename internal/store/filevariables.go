package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
)

// FileVariable is a Variable a Repo's devcontainer.json proposes
// (containerEnv, remoteEnv): applying the draft made from the file sets
// it, not Sensitive, unless the Repo has one of that name the file must
// not replace (FilePlan).
type FileVariable struct{ Name, Value string }

// FilePlan is what applying a draft's FileVariables does to its Repo's
// Variables. A file replaces only what a file set: a Sensitive Variable,
// one a person set, or a linked Shared one of the name is kept, since a
// push (a Sandbox's among them) can change the file.
type FilePlan struct {
	Set     []string // made, or a file's changed, by name
	Removed []string // a file's that the file no longer names
	// Kept are the names the file proposes and does not get, each with
	// why, one line each.
	Kept []string
}

// Changes are the plan's lines for a version's change log: names, never
// values, as the audit log takes them.
func (p FilePlan) Changes(path string) []string {
	var out []string
	for _, n := range p.Set {
		out = append(out, fmt.Sprintf("Variable %s: set from %s", n, path))
	}
	for _, n := range p.Removed {
		out = append(out, fmt.Sprintf("Variable %s: removed, no longer in %s", n, path))
	}
	return out
}

// fileVariablesJSON is a draft's variables column.
func fileVariablesJSON(vars []FileVariable) string {
	if len(vars) == 0 {
		return ""
	}
	b, _ := json.Marshal(vars) // strings alone: cannot fail
	return string(b)
}

func parseFileVariables(col string) ([]FileVariable, error) {
	if col == "" {
		return nil, nil
	}
	var vars []FileVariable
	if err := json.Unmarshal([]byte(col), &vars); err != nil {
		return nil, fmt.Errorf("a draft's Variables: %w", err)
	}
	return vars, nil
}

// PlanFileVariables says what applying vars, from the file at path, would
// do to the Repo's Variables now.
func (s *Environments) PlanFileVariables(ctx context.Context, repoID, path string, vars []FileVariable) (FilePlan, error) {
	p, _, err := planFileVariables(ctx, s.db, repoID, path, vars)
	return p, err
}

// planFileVariables is PlanFileVariables in q, a transaction's or the
// store's, with the Repo's own Variables by name.
func planFileVariables(ctx context.Context, q querier, repoID, path string, vars []FileVariable) (FilePlan, map[string]Variable, error) {
	own, err := queryAll(ctx, q, scanVariable, `SELECT `+variableCols+` FROM variables WHERE repo_id = ?`, repoID)
	if err != nil {
		return FilePlan{}, nil, err
	}
	linked, err := queryAll(ctx, q, scanString, `SELECT v.name FROM variable_links l JOIN variables v ON v.id = l.variable_id WHERE l.repo_id = ?`, repoID)
	if err != nil {
		return FilePlan{}, nil, err
	}
	byName := map[string]Variable{}
	for _, v := range own {
		byName[v.Name] = v
	}
	var p FilePlan
	named := map[string]bool{}
	for _, fv := range vars {
		named[fv.Name] = true
		v, ok := byName[fv.Name]
		switch {
		case slices.Contains(linked, fv.Name):
			p.Kept = append(p.Kept, fmt.Sprintf("%s: kept as it is; the Repo links the Shared variable %s, which %s never replaces", fv.Name, fv.Name, path))
		case !ok:
			p.Set = append(p.Set, fv.Name)
		case v.Sensitive:
			p.Kept = append(p.Kept, fmt.Sprintf("%s: kept as it is; the Repo's Variable %s is Sensitive, and %s never replaces one", fv.Name, fv.Name, path))
		case v.Source == "":
			p.Kept = append(p.Kept, fmt.Sprintf("%s: kept as it is; a person set the Repo's Variable %s, and %s never replaces that (remove it with kndl var rm to take the file's)", fv.Name, fv.Name, path))
		case v.Value != fv.Value:
			p.Set = append(p.Set, fv.Name)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		if v := byName[n]; v.Source != "" && !named[n] {
			p.Removed = append(p.Removed, n)
		}
	}
	return p, byName, nil
}

// applyFileVariables carries out the plan for the draft of repoID, if it
// was made from a file, in tx: the check and the writes see the same
// Variables. It returns the lines for the version's change log.
func (s *Environments) applyFileVariables(ctx context.Context, tx *sql.Tx, repoID, by string) ([]string, error) {
	var path, col string
	err := tx.QueryRowContext(ctx, `SELECT source_path, variables FROM environment_drafts WHERE repo_id = ?`, repoID).Scan(&path, &col)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if path == "" {
		return nil, nil // a person's draft leaves the Variables alone
	}
	vars, err := parseFileVariables(col)
	if err != nil {
		return nil, err
	}
	p, byName, err := planFileVariables(ctx, tx, repoID, path, vars)
	if err != nil {
		return nil, err
	}
	at := s.now()
	for _, fv := range vars {
		if !slices.Contains(p.Set, fv.Name) {
			continue
		}
		// What it replaces is a file's: not Sensitive, not at the Build,
		// loading no code (planFileVariables), as this one.
		id := byName[fv.Name].ID
		if id == "" {
			id = uuid.NewString()
		}
		v := Variable{ID: id, RepoID: repoID, Name: fv.Name, Value: fv.Value, SetBy: by, SetAt: at, Source: path}
		if err := upsertVariable(ctx, tx, v); err != nil {
			return nil, err
		}
	}
	for _, n := range p.Removed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM variables WHERE id = ?`, byName[n].ID); err != nil {
			return nil, err
		}
	}
	return p.Changes(path), nil
}
