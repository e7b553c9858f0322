package warmpool

import (
	"sync"
	"testing"
	"time"
)

var k = Key{Repo: "https://github.com/acme/app", Version: 3}

func mem(Key) int { return 256 }

// fill runs one fill of k to its end, as the Runner does.
func fill(t *testing.T, p *Pool, id string, fit Fit) *Entry {
	t.Helper()
	got, ok := p.Next(time.Now(), mem)
	if !ok || got != k {
		t.Fatalf("Next: got %v %v, want %v true", got, ok, k)
	}
	e := &Entry{ID: id, Key: k, Fit: fit, MemoryMiB: 256}
	if !p.Ready(e, 256) {
		t.Fatalf("Ready(%s): got false, want true", id)
	}
	return e
}

func TestNoPoolSandboxIsHandedToASecondSession(t *testing.T) {
	p := New(1, 0)
	p.Used(k, time.Now())
	fit := Fit{Variables: "v1"}
	fill(t, p, "a", fit)
	// Sessions taking at once: one gets it, the others none.
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, _ := p.Take(k, fit, ""); e != nil {
				mu.Lock()
				got[e.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got["a"] != 1 || len(got) != 1 {
		t.Fatalf("handed out: got %v, want a once", got)
	}
	// Nor does it come back: a fill that names it again adds nothing.
	if _, ok := p.Next(time.Now(), mem); !ok {
		t.Fatal("Next after the take: got nothing to fill, want k")
	}
	if p.Ready(&Entry{ID: "a", Key: k, Fit: fit}, 256) {
		t.Fatal("Ready of a Sandbox handed out before: got true, want false")
	}
	if e, _ := p.Take(k, fit, ""); e != nil {
		t.Fatalf("Take after it was handed out: got %s, want none", e.ID)
	}
}

func TestAChangedVariableThrowsAPoolSandboxAway(t *testing.T) {
	tests := []struct {
		name      string
		take      Fit
		effort    string
		wantTaken bool
		wantStale int
	}{
		{"the same", Fit{Variables: "v1", Installations: "i1"}, "", true, 0},
		{"a Variable changed", Fit{Variables: "v2", Installations: "i1"}, "", false, 1},
		{"an Installation changed", Fit{Variables: "v1", Installations: "i2"}, "", false, 1},
		{"another effort", Fit{Variables: "v1", Installations: "i1"}, "high", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(1, 0)
			p.Used(k, time.Now())
			fill(t, p, "a", Fit{Variables: "v1", Installations: "i1"})
			e, stale := p.Take(k, tt.take, tt.effort)
			if (e != nil) != tt.wantTaken || len(stale) != tt.wantStale {
				t.Fatalf("Take: got taken %v, %d thrown away; want %v, %d", e != nil, len(stale), tt.wantTaken, tt.wantStale)
			}
			ready, _ := p.Stats()
			wantReady := 0
			if !tt.wantTaken && tt.wantStale == 0 {
				wantReady = 1 // kept for a Session that asks for its effort
			}
			if ready != wantReady {
				t.Fatalf("ready after the take: got %d, want %d", ready, wantReady)
			}
			if tt.wantStale > 0 {
				if p.Ready(&Entry{ID: "a", Key: k}, 0) {
					t.Fatal("Ready of a Sandbox thrown away: got true, want false")
				}
			}
		})
	}
}

func TestThePoolFillsOnlyRecentVersionsWithinItsSizeAndMemory(t *testing.T) {
	now := time.Now()
	old := Key{Repo: "https://github.com/acme/old", Version: 1}
	tests := []struct {
		name      string
		size, mem int
		used      map[Key]time.Time
		want      int // fills Next begins
	}{
		{"one per version", 1, 0, map[Key]time.Time{k: now}, 1},
		{"two per version", 2, 0, map[Key]time.Time{k: now}, 2},
		{"a version used over a day ago", 1, 0, map[Key]time.Time{old: now.Add(-Recent - time.Minute)}, 0},
		{"memory for one of two", 2, 300, map[Key]time.Time{k: now}, 1},
		{"off", 0, 0, map[Key]time.Time{k: now}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.size, tt.mem)
			for key, at := range tt.used {
				p.Used(key, at)
			}
			n := 0
			for {
				if _, ok := p.Next(now, mem); !ok {
					break
				}
				n++
			}
			if n != tt.want {
				t.Fatalf("fills begun: got %d, want %d", n, tt.want)
			}
			if _, m := p.Stats(); m != n*256 {
				t.Fatalf("memory counted: got %d MiB, want %d", m, n*256)
			}
		})
	}
}
