package environment

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/store"
)

// TestAFileNeverReplacesASensitiveOrAPersonsVariable: applying a draft
// made from the Repo's devcontainer.json sets its Variables, not
// Sensitive, and replaces or removes only those a file set; a Sensitive
// Variable, one a person set and a linked Shared one of a name the file
// proposes are kept byte for byte, and the draft's notes say which and
// why. A draft a person made leaves the Variables alone.
func TestAFileNeverReplacesASensitiveOrAPersonsVariable(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	u, _ := st.Members.DevUser(ctx)
	set := func(v store.Variable) {
		t.Helper()
		v.SetBy = u.ID
		if _, _, err := st.Variables.SetVariable(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	set(store.Variable{RepoID: repo.ID, Name: "DB_URL", Sealed: []byte("sealed"), Sensitive: true})
	set(store.Variable{RepoID: repo.ID, Name: "REGION", Value: "eu"})
	set(store.Variable{Name: "NPM_TOKEN", Sealed: []byte("shared"), Sensitive: true})
	if err := st.Variables.LinkVariable(ctx, repo.ID, "NPM_TOKEN", u.ID); err != nil {
		t.Fatal(err)
	}
	const path = ".devcontainer/devcontainer.json"
	fromFile := func(vars ...store.FileVariable) Draft {
		t.Helper()
		v, err := svc.EditFrom(ctx, repo.ID, Config{}, u.ID, Source{Path: path, Commit: "c1", Variables: vars})
		if err != nil || v.Draft == nil {
			t.Fatalf("a draft from the file: %+v, %v", v, err)
		}
		return *v.Draft
	}
	own := func() map[string]store.Variable {
		t.Helper()
		vs, err := st.Variables.List(ctx, repo.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.Variable{}
		for _, v := range vs {
			out[v.Name] = v
		}
		return out
	}
	before := own()

	d := fromFile(store.FileVariable{Name: "DB_URL", Value: "postgres://file"}, store.FileVariable{Name: "REGION", Value: "us"},
		store.FileVariable{Name: "NPM_TOKEN", Value: "x"}, store.FileVariable{Name: "GOPATH", Value: "/go"}, store.FileVariable{Name: "OLD", Value: "1"})
	if want := []string{"Variable GOPATH: set from " + path, "Variable OLD: set from " + path}; !reflect.DeepEqual(d.Changes, want) || d.NeedsTest {
		t.Fatalf("the draft's changes: %q (needs a Test build: %v), want %q and none", d.Changes, d.NeedsTest, want)
	}
	notes := strings.Join(d.Source().Notes, "\n")
	for _, want := range []string{"DB_URL: kept as it is; the Repo's Variable DB_URL is Sensitive", "REGION: kept as it is; a person set", "NPM_TOKEN: kept as it is; the Repo links the Shared variable"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the draft's notes: %q, want %q", notes, want)
		}
	}
	v1, err := svc.Apply(ctx, repo.ID, u.ID)
	if err != nil || !strings.Contains(v1.Changes, "Variable GOPATH: set from "+path) {
		t.Fatalf("apply: %+v, %v; want the Variables in its change log", v1, err)
	}
	after := own()
	for _, n := range []string{"DB_URL", "REGION"} {
		if !reflect.DeepEqual(after[n], before[n]) {
			t.Errorf("%s after the apply: got %+v, want it as it was, %+v", n, after[n], before[n])
		}
	}
	if g := after["GOPATH"]; g.Value != "/go" || g.Sensitive || g.AtBuild || g.LoadsCode || g.Source != path {
		t.Errorf("GOPATH after the apply: got %+v, want /go from %s, not Sensitive", g, path)
	}
	if linked, _ := st.Variables.LinkedVariables(ctx, repo.ID); len(linked) != 1 || !linked[0].Sensitive || string(linked[0].Sealed) != "shared" {
		t.Errorf("the linked Shared variable: got %+v, want it as it was", linked)
	}

	// The file's next draft changes GOPATH and drops OLD; before it
	// applies, a person takes GOPATH over and makes REGION Sensitive: the
	// apply, not the draft, is where the rule holds.
	d = fromFile(store.FileVariable{Name: "GOPATH", Value: "/go2"}, store.FileVariable{Name: "REGION", Value: "us"})
	if want := []string{"Variable GOPATH: set from " + path, "Variable OLD: removed, no longer in " + path}; !reflect.DeepEqual(d.Changes, want) {
		t.Fatalf("the second draft's changes: %q, want %q", d.Changes, want)
	}
	set(store.Variable{RepoID: repo.ID, Name: "GOPATH", Value: "/mine"})
	set(store.Variable{RepoID: repo.ID, Name: "REGION", Sealed: []byte("sealed-region"), Sensitive: true})
	before = own()
	v2, err := svc.Apply(ctx, repo.ID, u.ID)
	if err != nil || strings.Contains(v2.Changes, "GOPATH") {
		t.Fatalf("the second apply: %+v, %v; want no GOPATH in its change log", v2, err)
	}
	after = own()
	if _, ok := after["OLD"]; ok || !reflect.DeepEqual(after["GOPATH"], before["GOPATH"]) || !reflect.DeepEqual(after["REGION"], before["REGION"]) {
		t.Errorf("after the second apply: got %+v, want OLD removed and GOPATH, REGION as they were", after)
	}

	// A person's draft leaves the Variables alone, the file's too.
	set(store.Variable{RepoID: repo.ID, Name: "GOPATH", Value: "/go"}) // a person's still
	if _, err := svc.EditFrom(ctx, repo.ID, Config{}, u.ID, Source{Path: path, Variables: []store.FileVariable{{Name: "FROM_FILE", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Apply(ctx, repo.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	before = own()
	v, err := svc.Edit(ctx, repo.ID, Config{CPUs: 1}, u.ID)
	if err != nil || slices.ContainsFunc(v.Draft.Changes, func(c string) bool { return strings.HasPrefix(c, "Variable") }) {
		t.Fatalf("a person's draft: %+v, %v; want no Variable in its changes", v.Draft, err)
	}
	if _, err := svc.Apply(ctx, repo.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if after := own(); !reflect.DeepEqual(after, before) {
		t.Errorf("after a person's draft: got %+v, want the Variables as they were, %+v", after, before)
	}
}
