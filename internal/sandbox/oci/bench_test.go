package oci_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// BenchmarkCreateStartExec is a Sandbox made from a warm layer set (the
// cached test rootfs), booted, and running `true` once: what a Session's
// start costs the backend. Remove is outside the timer. Reports the
// median too, the figure the target (150 ms) is set on.
//
//	CGO_ENABLED=0 go test -run '^$' -bench CreateStartExec -benchtime 20x ./internal/sandbox/oci/
func BenchmarkCreateStartExec(b *testing.B) {
	base := requireOCI(b)
	be := newBackend(b, oci.Options{StateDir: b.TempDir() + "/state", RelayPort: freePort(b), Logger: quiet})
	ctx := context.Background()
	var times []time.Duration
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("bench-%d", i)
		start := time.Now()
		if err := be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}}); err != nil {
			b.Fatal(err)
		}
		if err := be.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		p, err := be.Exec(ctx, id, sandbox.Cmd{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); err != nil || code != 0 {
			b.Fatalf("true: exit %d, %v", code, err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		if err := be.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
}

var quiet = slog.New(slog.DiscardHandler)

// BenchmarkExec is one `true` in a running Sandbox: the cost of every
// command the Runner runs there.
//
//	CGO_ENABLED=0 go test -run '^$' -bench 'Exec$' -benchtime 50x ./internal/sandbox/oci/
func BenchmarkExec(b *testing.B) {
	base := requireOCI(b)
	be := newBackend(b, oci.Options{StateDir: b.TempDir() + "/state", RelayPort: freePort(b), Logger: quiet})
	ctx := context.Background()
	if err := be.Create(ctx, sandbox.Spec{ID: "bench", Layers: []string{base}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Remove(ctx, "bench") })
	if err := be.Start(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := be.Exec(ctx, "bench", sandbox.Cmd{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); err != nil || code != 0 {
			b.Fatalf("true: exit %d, %v", code, err)
		}
	}
}
