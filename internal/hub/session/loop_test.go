package session

import (
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// TestASessionsStepsRunOneAtATimeInOrder: steps posted side by side to
// one Session's loop never overlap, each poster's run in the order it
// posted them, and each returns once its step ran; another Session's loop
// runs beside it. A step that leaves no run (down) ends the loop: later
// steps find none, and the next with starts a fresh one.
func TestASessionsStepsRunOneAtATimeInOrder(t *testing.T) {
	o := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer o.Close()
	ids := []string{"a", "b"}
	for _, id := range ids {
		o.runs.with(id, func(r *run) { r.phase = idle })
	}
	const posters, each = 8, 200
	var in [2]atomic.Int32
	var overlaps atomic.Int32
	last := make([]int, posters)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := range each {
				session := p % 2
				ran := false
				ok := o.runs.on(ids[session], func(*run) {
					if in[session].Add(1) != 1 {
						overlaps.Add(1)
					}
					if i != 0 && last[p] != i-1 {
						t.Errorf("poster %d: step %d ran after step %d, want %d", p, i, last[p], i-1)
					}
					last[p] = i
					ran = true
					runtime.Gosched() // room for another to start, were it let
					in[session].Add(-1)
				})
				if !ok || !ran {
					t.Errorf("poster %d: onRun returned %v before step %d ran, want true after", p, ok, i)
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d steps of one Session ran while another did, want none", n)
	}

	if !o.runs.on("a", func(r *run) { r.phase = down }) {
		t.Fatal("the step that ends the run did not run")
	}
	if o.runs.on("a", func(*run) {}) {
		t.Error("a step ran on an ended run, want none")
	}
	if got := o.runs.ids(); len(got) != 1 || got[0] != "b" {
		t.Errorf("got loops %v, want only b's", got)
	}
	var fresh bool
	o.runs.with("a", func(r *run) { fresh = r.phase == down && r.delivery.state == queued })
	if !fresh {
		t.Error("with after the end found the old run, want a fresh one")
	}
}

// TestTheLoopTakesStepsWhileTheRunnerTypes: a Runner that has not
// answered session.deliver holds no step of the Session: the hook's word
// that Claude Code took the prompt is taken meanwhile, and a Turn runs.
func TestTheLoopTakesStepsWhileTheRunnerTypes(t *testing.T) {
	f := newFixture(t)
	f.runner.holdDeliveries()
	s, _ := f.active("hello") // on its way; the Runner never answers
	done := make(chan string, 1)
	go func() {
		f.o.Accepted(s.ID)
		done <- f.o.Activity(s.ID)
	}()
	select {
	case got := <-done:
		if got != "turn" {
			t.Fatalf("got activity %q after the hook, want turn", got)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("the hook's step waited on the Runner's answer to session.deliver")
	}
}
