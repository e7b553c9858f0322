package store

import (
	"context"
	"reflect"
	"testing"
)

// TestApplyDraftSetsTheFilesVariablesOnEachEngine: the file's Variables,
// set, changed and removed by ApplyDraft in its transaction on both
// engines; a person's Variable of the name is kept, and a person's set
// takes a file's over.
func TestApplyDraftSetsTheFilesVariablesOnEachEngine(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		u, _ := s.Members.DevUser(ctx)
		repo, _ := s.Repos.EnsureRepo(ctx, "/srv/app", "app")
		if _, _, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "MINE", Value: "m", SetBy: u.ID}); err != nil {
			t.Fatal(err)
		}
		const path = ".devcontainer.json"
		apply := func(base int, vars ...FileVariable) EnvironmentVersion {
			t.Helper()
			if _, err := s.Environments.SaveDraft(ctx, EnvironmentDraft{RepoID: repo.ID, BaseVersion: base, Config: "{}", UpdatedBy: u.ID, SourcePath: path, Variables: vars}); err != nil {
				t.Fatal(err)
			}
			if d, err := s.Environments.Draft(ctx, repo.ID); err != nil || !reflect.DeepEqual(d.Variables, vars) {
				t.Fatalf("the draft's Variables: got %+v, %v; want %+v", d.Variables, err, vars)
			}
			v, err := s.Environments.ApplyDraft(ctx, EnvironmentVersion{RepoID: repo.ID, Config: "{}", CreatedBy: u.ID}, base)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		values := func() map[string]string {
			t.Helper()
			vs, err := s.Variables.List(ctx, repo.ID)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, v := range vs {
				out[v.Name] = v.Value + "@" + v.Source
			}
			return out
		}

		v1 := apply(0, FileVariable{"A", "1"}, FileVariable{"B", "2"}, FileVariable{"MINE", "file"})
		if want := "Variable A: set from " + path + "\nVariable B: set from " + path; v1.Changes != want {
			t.Errorf("version 1's changes: got %q, want %q", v1.Changes, want)
		}
		if got, want := values(), map[string]string{"A": "1@" + path, "B": "2@" + path, "MINE": "m@"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after version 1: got %v, want %v", got, want)
		}
		if _, _, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "B", Value: "person", SetBy: u.ID}); err != nil {
			t.Fatal(err)
		}
		v2 := apply(1, FileVariable{"B", "3"}, FileVariable{"C", "x"})
		if want := "Variable C: set from " + path + "\nVariable A: removed, no longer in " + path; v2.Changes != want {
			t.Errorf("version 2's changes: got %q, want %q", v2.Changes, want)
		}
		if got, want := values(), map[string]string{"B": "person@", "C": "x@" + path, "MINE": "m@"}; !reflect.DeepEqual(got, want) {
			t.Errorf("after version 2: got %v, want %v", got, want)
		}
	})
}
