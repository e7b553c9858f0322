package placement

import (
	"errors"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func runner(name string, load, capacity Amount) Runner {
	return Runner{Name: name, Load: load, Capacity: capacity}
}

// TestPickSpreadsByLoadWithinCapacity: a Session goes to the Runner it
// leaves least full, by each capacity the Runner reports; a full one is
// skipped; ties go to the first name.
func TestPickSpreadsByLoadWithinCapacity(t *testing.T) {
	four := Amount{Sessions: 4, CPUs: 4, MemoryMiB: 4096}
	for _, c := range []struct {
		name string
		rs   []Runner
		ask  Ask
		want string
	}{
		{"fewest Sessions", []Runner{runner("a", Amount{Sessions: 2}, four), runner("b", Amount{Sessions: 1}, four)}, Ask{}, "b"},
		{"a tie goes to the first name", []Runner{runner("b", Amount{}, four), runner("a", Amount{}, four)}, Ask{}, "a"},
		{"by share, not count: the bigger Runner", []Runner{runner("a", Amount{Sessions: 1}, Amount{Sessions: 2}), runner("b", Amount{Sessions: 2}, Amount{Sessions: 10})}, Ask{}, "b"},
		{"memory asked counts", []Runner{runner("a", Amount{Sessions: 1, MemoryMiB: 3500}, four), runner("b", Amount{Sessions: 2}, four)}, Ask{MemoryMiB: 100}, "b"},
		{"CPUs asked count", []Runner{runner("a", Amount{CPUs: 3.5}, four), runner("b", Amount{Sessions: 2}, four)}, Ask{CPUs: 1}, "b"},
		{"a full Runner is skipped", []Runner{runner("a", Amount{Sessions: 4}, four), runner("b", Amount{Sessions: 3}, four)}, Ask{}, "b"},
		{"an unreported capacity is no limit", []Runner{runner("a", Amount{Sessions: 40}, Amount{}), runner("b", Amount{Sessions: 4}, four)}, Ask{}, "a"},
		{"no ask reserves nothing", []Runner{runner("a", Amount{Sessions: 1, CPUs: 4, MemoryMiB: 4096}, four)}, Ask{}, "a"},
	} {
		i, err := Pick(c.rs, c.ask, false)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := c.rs[i].Name; got != c.want {
			t.Errorf("%s: picked %s, want %s", c.name, got, c.want)
		}
	}
}

// TestPickRefusesWhenFullNamingEachLoad: with every Runner full the start
// is refused, naming each Runner with its load and capacity; a Runner named
// that is full is refused as such.
func TestPickRefusesWhenFullNamingEachLoad(t *testing.T) {
	rs := []Runner{
		runner("a", Amount{Sessions: 2, CPUs: 1, MemoryMiB: 512}, Amount{Sessions: 2, CPUs: 2, MemoryMiB: 2048}),
		runner("b", Amount{Sessions: 1, MemoryMiB: 2000}, Amount{Sessions: 2, CPUs: 2, MemoryMiB: 2048}),
	}
	_, err := Pick(rs, Ask{MemoryMiB: 100}, false)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"every Runner you may use is full", "100 MiB",
		"a (2 of 2 Sessions, 1 of 2 CPUs, 512 of 2048 MiB)", "b (1 of 2 Sessions, 0 of 2 CPUs, 2000 of 2048 MiB)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	_, err = Pick(rs[:1], Ask{}, true)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "the Runner a (2 of 2 Sessions") || !strings.Contains(err.Error(), "one more Session") {
		t.Errorf("named and full: got %v", err)
	}
}

// TestAskIsCappedByWhatASandboxGets: a Session asking more than the
// Runner gives one Sandbox counts, and is placed, as the caps it gets.
func TestAskIsCappedByWhatASandboxGets(t *testing.T) {
	r := Runner{Name: "a", Capacity: Amount{Sessions: 4, CPUs: 2, MemoryMiB: 4096}, Caps: Ask{CPUs: 1, MemoryMiB: 1024}}
	r.Add(Ask{CPUs: 8, MemoryMiB: 8192})
	if want := (Amount{Sessions: 1, CPUs: 1, MemoryMiB: 1024}); r.Load != want {
		t.Fatalf("load %+v, want %+v", r.Load, want)
	}
	if _, err := Pick([]Runner{r}, Ask{CPUs: 8}, true); err != nil {
		t.Errorf("a second Session capped at 1 CPU fits 2: %v", err)
	}
	r.Add(Ask{CPUs: 1})
	if _, err := Pick([]Runner{r}, Ask{CPUs: 0.5}, true); err == nil {
		t.Error("a third CPU fit 2")
	}
}
