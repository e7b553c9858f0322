package hub

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/store"
)

// TestAPITypesCarryTheRowsJSON: a client that decodes what the Hub sends
// into the api types, and encodes it again, gets the Hub's JSON back; and
// where the Hub converts a row, it sends what the row would have. Each
// row is tried empty and with every field set, so a field added to a row
// and not to its api type (or with another omitempty) fails here.
func TestAPITypesCarryTheRowsJSON(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"Session", sameJSON(apiSession)},
		{"Prompt", sameJSON(apiPrompt)},
		{"Attachment", sameJSON(apiAttachment)},
		{"Runner", sameJSON(apiRunner)},
		{"Invite", sameJSON(apiInvite)},
		{"Repo", sameJSON(apiRepo)},
		{"Variable", sameJSON(apiVariable)},
		// Written as rows, decoded by clients into api types.
		{"User", sameJSON[store.User, api.User](nil)},
		{"Environment", sameJSON[environment.View, api.Environment](nil)},
		{"EnvironmentDraft", sameJSON[environment.Draft, api.EnvironmentDraft](nil)},
		{"EnvironmentVersion", sameJSON[environment.Version, api.EnvironmentVersion](nil)},
		{"TestBuild", sameJSON[store.TestBuild, api.TestBuild](nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

func sameJSON[R, A any](convert func(R) A) func(t *testing.T) {
	return func(t *testing.T) {
		var full R
		fill(reflect.ValueOf(&full).Elem())
		for _, row := range []R{*new(R), full} {
			want, _ := json.Marshal(row)
			var decoded A
			if err := json.Unmarshal(want, &decoded); err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(decoded); string(got) != string(want) {
				t.Errorf("decoded into %T and encoded again: got %s, want %s", decoded, got, want)
			}
			if convert == nil {
				continue
			}
			if got, _ := json.Marshal(convert(row)); string(got) != string(want) {
				t.Errorf("converted to %T: got %s, want %s", decoded, got, want)
			}
		}
	}
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
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	}
}
