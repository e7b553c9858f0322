package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func TestVariablesLinksAndClashes(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		u, _ := s.Members.DevUser(ctx)
		repo, _ := s.Repos.EnsureRepo(ctx, "/srv/app", "app")

		plain, old, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "REGION", Value: "eu", SetBy: u.ID})
		if err != nil || old != nil || plain.Value != "eu" {
			t.Fatalf("set plain: %+v %v %v", plain, old, err)
		}
		sens, _, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "DB_URL", Sealed: []byte("sealed-bytes"), Sensitive: true, SetBy: u.ID})
		if err != nil || sens.Value != "" {
			t.Fatalf("set sensitive: %+v %v", sens, err)
		}
		_, replaced, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "REGION", Value: "us", AtBuild: true, SetBy: u.ID})
		if err != nil || replaced == nil || replaced.Value != "eu" {
			t.Fatalf("replace: got the replaced %+v, %v", replaced, err)
		}
		if _, _, err := s.Variables.SetVariable(ctx, Variable{Name: "NPM_TOKEN", Sealed: []byte("x"), Sensitive: true, SetBy: u.ID}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Variables.SetVariable(ctx, Variable{Name: "REGION", Value: "shared", SetBy: u.ID}); err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name string
			err  error
			do   func() error
		}{
			{"link a Shared variable", nil, func() error { return s.Variables.LinkVariable(ctx, repo.ID, "NPM_TOKEN", u.ID) }},
			{"link twice", nil, func() error { return s.Variables.LinkVariable(ctx, repo.ID, "NPM_TOKEN", u.ID) }},
			{"link one the Repo has a Variable of that name for", errdefs.ErrConflict, func() error { return s.Variables.LinkVariable(ctx, repo.ID, "REGION", u.ID) }},
			{"link one that does not exist", errdefs.ErrNotFound, func() error { return s.Variables.LinkVariable(ctx, repo.ID, "NOPE", u.ID) }},
			{"a Repo Variable named as a linked one", errdefs.ErrConflict, func() error {
				_, _, err := s.Variables.SetVariable(ctx, Variable{RepoID: repo.ID, Name: "NPM_TOKEN", Value: "x", SetBy: u.ID})
				return err
			}},
			{"unlink one not linked", errdefs.ErrNotFound, func() error { return s.Variables.UnlinkVariable(ctx, repo.ID, "REGION") }},
		}
		for _, tt := range tests {
			if err := tt.do(); !errors.Is(err, tt.err) && !(tt.err == nil && err == nil) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
			}
		}
		vs, err := s.Variables.SessionVariables(ctx, repo.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range vs {
			names = append(names, v.Name)
			if v.Name == "NPM_TOKEN" && (!v.Shared || string(v.Sealed) != "x") {
				t.Errorf("the linked Shared variable: %+v", v)
			}
		}
		if strings.Join(names, ",") != "DB_URL,REGION,NPM_TOKEN" {
			t.Fatalf("session variables = %v", names)
		}
		// Removing a Shared variable removes its links.
		if _, err := s.Variables.DeleteVariable(ctx, "", "NPM_TOKEN"); err != nil {
			t.Fatal(err)
		}
		if vs, _ := s.Variables.SessionVariables(ctx, repo.ID); len(vs) != 2 {
			t.Fatalf("after removing the Shared variable: %d variables, want 2", len(vs))
		}
		if _, err := s.Variables.DeleteVariable(ctx, repo.ID, "NOPE"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("delete missing: %v", err)
		}
	})
}
