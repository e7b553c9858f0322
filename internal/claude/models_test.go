package claude

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func TestTheModelsTableIsThePinnedVersions(t *testing.T) {
	table := Models()
	if table.Version != Version {
		t.Fatalf("models.json was probed from %s, but the pin is %s: run scripts/pin-claude %s", table.Version, Version, Version)
	}
	def, ok := table.Default()
	if !ok {
		t.Fatal("no default model")
	}
	if got, ok := LookupModel(def.Alias); !ok || got.ID != def.ID {
		t.Errorf("LookupModel(%q) = %+v, %v; want the default %+v", def.Alias, got, ok, def)
	}
	if got, ok := LookupModel(def.ID); !ok || got.Alias != def.Alias {
		t.Errorf("LookupModel(%q) = %+v, %v; want the default %+v", def.ID, got, ok, def)
	}
	if _, ok := LookupModel("no-such-model"); ok {
		t.Error("LookupModel found no-such-model")
	}
	// What callers get is theirs to change.
	table.Models[0].Efforts = append(table.Models[0].Efforts[:0], "changed")
	if slices.Contains(Models().Models[0].Efforts, "changed") {
		t.Error("changing the table Models returned changed the pinned one")
	}
}

func TestAModelTakesOnlyItsEfforts(t *testing.T) {
	m := Model{Alias: "a", ID: "a-1", DisplayName: "A", Efforts: []string{"low", "high"}}
	for effort, want := range map[string]bool{"low": true, "high": true, "medium": false, "": false} {
		if got := m.TakesEffort(effort); got != want {
			t.Errorf("TakesEffort(%q) = %v, want %v", effort, got, want)
		}
	}
}

func TestABrokenTableIsRefusedSayingWhy(t *testing.T) {
	good := Table{Version: "1.0.0", Models: []Model{
		{Alias: "sonnet", ID: "claude-sonnet-1", DisplayName: "Sonnet 1", Efforts: []string{"low", "max"}, Default: true},
		{Alias: "haiku", ID: "claude-haiku-1", DisplayName: "Haiku 1"},
	}}
	data, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTable(data)
	if err != nil {
		t.Fatalf("a marshalled table does not parse back: %v", err)
	}
	if m, ok := back.Lookup("claude-haiku-1"); !ok || m.Alias != "haiku" || len(m.Efforts) != 0 {
		t.Errorf("Lookup(claude-haiku-1) = %+v, %v", m, ok)
	}
	tests := []struct {
		name   string
		change func(*Table)
		want   string
	}{
		{"no version", func(t *Table) { t.Version = "" }, "no version"},
		{"no models", func(t *Table) { t.Models = nil }, "no models"},
		{"no id", func(t *Table) { t.Models[1].ID = "" }, "lacks an alias, id or display name"},
		{"an alias twice", func(t *Table) { t.Models[1].Alias = "sonnet" }, `"sonnet" names two models`},
		{"an alias that is another's id", func(t *Table) { t.Models[1].Alias = "claude-sonnet-1" }, "names two models"},
		{"an unknown effort", func(t *Table) { t.Models[0].Efforts = []string{"extreme"} }, `takes effort "extreme"`},
		{"two defaults", func(t *Table) { t.Models[1].Default = true }, "2 default models"},
		{"no default", func(t *Table) { t.Models[0].Default = false }, "0 default models"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			broken := good.clone()
			tt.change(&broken)
			if _, err := broken.Marshal(); err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Marshal: got %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
	if _, err := ParseTable([]byte(`{"version":"1","models":[],"extra":1}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("a table with an unknown field: got %v", err)
	}
}

func TestRunnersOfferOnlyTheModelsAndEffortsTheyAllTake(t *testing.T) {
	a := Table{Version: "1", Models: []Model{
		{Alias: "sonnet", ID: "s-1", DisplayName: "S", Efforts: []string{"low", "high", "max"}, Default: true},
		{Alias: "opus", ID: "o-1", DisplayName: "O", Efforts: []string{"low"}},
		{Alias: "haiku", ID: "h-1", DisplayName: "H"},
	}}
	b := Table{Version: "2", Models: []Model{
		{Alias: "opus", ID: "o-2", DisplayName: "O", Efforts: []string{"low"}, Default: true}, // another id: not the same model
		{Alias: "sonnet", ID: "s-1", DisplayName: "S", Efforts: []string{"low", "high"}},
		{Alias: "haiku", ID: "h-1", DisplayName: "H"},
	}}
	got := Common([]Table{a, b})
	want := Table{Models: []Model{
		{Alias: "sonnet", ID: "s-1", DisplayName: "S", Efforts: []string{"low", "high"}},
		{Alias: "haiku", ID: "h-1", DisplayName: "H"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Common = %+v\nwant %+v", got, want)
	}
	if got := Common([]Table{a, a}); !reflect.DeepEqual(got, a) {
		t.Errorf("Common of one table twice = %+v, want it whole %+v", got, a)
	}
	if got := Common(nil); len(got.Models) != 0 {
		t.Errorf("Common of no Runners offers %+v, want nothing", got.Models)
	}
}

func TestASessionTakesOnlyAnOfferedModelAndItsEfforts(t *testing.T) {
	offer := Models()
	def, _ := offer.Default()
	for _, tt := range []struct{ model, effort, refused string }{
		{"", "", ""},
		{def.Alias, def.Efforts[0], ""},
		{def.ID, "", ""},
		{"", def.Efforts[0], ""},
		{"no-such-model", "", `model "no-such-model" is not offered: use ` + def.Alias + " (" + def.ID + ")"},
		{def.Alias, "warp", `effort "warp": model ` + def.Alias + " takes " + strings.Join(def.Efforts, ", ")},
	} {
		err := offer.Takes(tt.model, tt.effort)
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("Takes(%q, %q) = %v, want taken", tt.model, tt.effort, err)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused) || !errors.Is(err, errdefs.ErrInvalid)):
			t.Errorf("Takes(%q, %q) = %v, want invalid saying %q", tt.model, tt.effort, err, tt.refused)
		}
	}
	noEffort := Table{Models: []Model{{Alias: "h", ID: "h-1", DisplayName: "H", Default: true}}}
	if err := noEffort.Takes("h", "low"); err == nil || !strings.Contains(err.Error(), "takes no effort") {
		t.Errorf("an effort for a model that takes none: %v", err)
	}
	if err := (Table{}).Takes("sonnet", ""); err == nil || !strings.Contains(err.Error(), `use "" for the default`) {
		t.Errorf("a model when nothing is offered: %v", err)
	}
}

func TestEveryModelOfTheTableHasAPrice(t *testing.T) {
	for _, m := range Models().Models {
		if _, ok := PriceOf(m.ID); !ok {
			t.Errorf("model %s (%s) has no row in prices.json", m.Alias, m.ID)
		}
	}
}

func TestACostIsTheTokensOfEachKindAtTheirPrice(t *testing.T) {
	u := Tokens{Input: 2_000_000, Output: 100_000, CacheRead: 1_000_000, CacheWrite: 400_000}
	got, ok := EstimatedCost("claude-opus-5-5-20261101", u)
	// 2 x 4 + 0.1 x 20 + 1 x 0.2 + 0.4 x 5, by prices.json's row for the undated id.
	if want := 8 + 2 + 0.2 + 2.0; !ok || math.Abs(got-want) > 1e-9 {
		t.Errorf("got %v, %v, want %v, true", got, ok, want)
	}
	if _, ok := EstimatedCost("claude-sonnet-5-50", Tokens{Input: 1}); ok {
		t.Error("a model the table does not name is priced, want none")
	}
}
