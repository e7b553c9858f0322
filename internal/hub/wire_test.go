package hub

import (
	"cmp"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEachRowGoesOutInItsAPIShapeByteForByte: store rows carry no json
// tags, so the Hub's answers are the conversions here. Each is pinned to
// testdata/wire/NAME.json, the JSON the Hub sent before the rows lost
// their tags (an Environment without its config string, which the
// settings beside it carried already): the empty row's, then a row with
// every field set. A client that decodes it into the api type and encodes
// it again gets the same bytes; and the full row's answer has every field
// the api type declares, so a field added to it and not converted fails.
func TestEachRowGoesOutInItsAPIShapeByteForByte(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, name string)
	}{
		{"Session", pinned(apiSession, "activity", "pull", "spent")}, // sessionRows.now adds what it is doing, sessionRows.list its pull request and what it spent
		{"Prompt", pinned(apiPrompt)},
		{"Attachment", pinned(apiAttachment)},
		{"Runner", pinned(apiRunner)},
		{"Invite", pinned(apiInvite)},
		{"Repo", pinned(apiRepo)},
		{"RepoLimits", pinned(apiRepoLimits)},
		{"Variable", pinned(apiVariable, "loads_code_rule")}, // only a name under loadscode.Table has a rule
		{"User", pinned(apiUser)},
		{"TestBuild", pinned(apiTestBuild)},
		{"Environment", pinned(apiEnvironment, "follows")}, // the handler adds the file the Repo follows
		{"EnvironmentDraft", pinned(apiEnvironmentDraft)},
		{"EnvironmentVersion", pinned(apiEnvironmentVersion)},
		{"AutoFix", pinned(apiAutoFix)},
		{"Fork", pinned(apiFork, "how")}, // the answer to a fork adds how the Runner copied it
		{"TurnCheck", pinned(apiTurnCheck)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, tt.name) })
	}
}

// pinned checks convert against its golden file; unset names the api
// fields the conversion leaves to its caller.
func pinned[R, A any](convert func(R) A, unset ...string) func(t *testing.T, name string) {
	return func(t *testing.T, name string) {
		golden, err := os.ReadFile(filepath.Join("testdata", "wire", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimSpace(string(golden)), "\n")
		var full R
		fill(reflect.ValueOf(&full).Elem())
		for i, row := range []R{*new(R), full} {
			got, _ := json.Marshal(convert(row))
			if string(got) != want[i] {
				t.Errorf("%T as %T:\n got %s\nwant %s", row, convert(row), got, want[i])
			}
			var decoded A
			if err := json.Unmarshal(got, &decoded); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.Marshal(decoded); string(again) != string(got) {
				t.Errorf("decoded into %T and encoded again: got %s, want %s", decoded, again, got)
			}
		}
		var keys map[string]json.RawMessage
		json.Unmarshal([]byte(want[1]), &keys)
		for _, k := range jsonNames(reflect.TypeFor[A]()) {
			if _, ok := keys[k]; !ok && !slices.Contains(unset, k) {
				t.Errorf("%s: the full row's answer has no %q: convert it", name, k)
			}
		}
	}
}

// jsonNames are the keys a struct's JSON can have, embedded structs' inline.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			out = append(out, jsonNames(f.Type)...)
		case name != "-" && f.IsExported():
			out = append(out, cmp.Or(name, f.Name))
		}
	}
	return out
}

// fill sets every field of v to something other than its zero value.
func fill(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)))
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"kind":"text"}`)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanInt():
		v.SetInt(7)
	case v.CanFloat():
		v.SetFloat(1.5)
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case v.Kind() == reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	}
}

// TestAYesOrNoBodyThatLeavesItOutIsRefused: a Session's switches and a
// Runner's sharing are read into api types whose switch is a pointer, so a body
// without it is refused rather than read as off.
func TestAYesOrNoBodyThatLeavesItOutIsRefused(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/api/sessions/none/keep-awake", "/api/sessions/none/thread-context", "/api/runners/" + f.runner.ID + "/shared"} {
		if code, body := f.call(t, http.MethodPut, path, `{}`); code != http.StatusBadRequest || !strings.Contains(body, "say {") {
			t.Errorf("PUT %s {}: %d %s, want 400 naming the field", path, code, body)
		}
	}
}
