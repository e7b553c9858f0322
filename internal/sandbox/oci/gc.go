package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/sandbox"
)

// Orphan is a state directory no process has a backend over any more,
// with the Sandboxes it left on the host: running, or stopped and
// holding their slots.
type Orphan struct {
	StateDir string
	// Owner is who registered it last; zero for a directory no owner
	// registered, made by a kndl from before owners were.
	Owner     Owner
	Sandboxes []Orphaned
}

// Orphaned is a Sandbox an Orphan left.
type Orphaned struct {
	ID      string
	Slot    int
	Running bool
	// Since is when it last started, if it runs; else when its record
	// was last written.
	Since time.Time
}

// Orphans lists the state directories whose Sandboxes hold claims in
// slotsDir and that no process has a backend over: none holds their
// owner.lock, and none holds one of their slot claims (as a backend from
// before owners registered does). This process takes each one over
// (takeOver) and holds it until it exits, so no backend starts over one
// while the caller decides; Open then makes one without waiting.
func Orphans(slotsDir string) ([]Orphan, error) {
	entries, err := os.ReadDir(slotsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := newHostSlots(slotsDir)
	claims := map[string][]int{} // slots claimed, by state directory
	ids := map[int]string{}
	for _, e := range entries {
		num, ok := strings.CutSuffix(e.Name(), ".lock")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		var o slotOwner
		if readJSON(s.path(n), &o) != nil || !o.exists() {
			continue // free
		}
		claims[o.StateDir] = append(claims[o.StateDir], n)
		ids[n] = o.ID
	}
	var out []Orphan
	for dir, slots := range claims {
		ok, err := takeOver(dir)
		if err != nil {
			return nil, fmt.Errorf("take %s over: %w", dir, err)
		}
		if !ok {
			continue // its owner lives
		}
		if slices.ContainsFunc(slots, s.inUse) {
			letGo(dir)
			continue
		}
		o := Orphan{StateDir: dir}
		readJSON(ownerFile(dir), &o.Owner)
		for _, n := range slots {
			o.Sandboxes = append(o.Sandboxes, orphaned(dir, ids[n], n))
		}
		slices.SortFunc(o.Sandboxes, func(a, b Orphaned) int { return a.Slot - b.Slot })
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Orphan) int { return strings.Compare(a.StateDir, b.StateDir) })
	return out, nil
}

// inUse reports whether a process holds slot n's claim.
func (s *hostSlots) inUse(n int) bool {
	f, _, err := s.lock(n)
	if err != nil {
		return true // held, or unreadable: not this process's to judge
	}
	f.Close()
	return false
}

func orphaned(stateDir, id string, slot int) Orphaned {
	d := sandboxDir(filepath.Join(stateDir, "sandboxes", id))
	x := Orphaned{ID: id, Slot: slot}
	var run runRecord
	since := d.record()
	if readJSON(d.run(), &run) == nil && run.alive() {
		x.Running, since = true, d.run()
	}
	if st, err := os.Stat(since); err == nil {
		x.Since = st.ModTime().UTC()
	}
	return x
}

// Open makes a backend over the Orphan's state directory with its
// owner's options (one no owner registered: the runtime its directory's
// name says, DirName, the rest the defaults), registering this process
// as its owner, so that the caller removes what it left.
func (o Orphan) Open(ctx context.Context, log *slog.Logger) (*OCI, error) {
	w := o.Owner
	opts := Options{StateDir: o.StateDir, Runtime: w.Runtime, RuntimePath: w.RuntimePath, HostDir: w.HostDir, SlotsDir: w.SlotsDir,
		RelayIP: w.RelayIP, RelayPort: w.RelayPort, EgressPort: w.EgressPort, Logger: log}
	if opts.Runtime == "" && filepath.Base(o.StateDir) == DirName("runsc") {
		opts.Runtime = "runsc"
	}
	return New(ctx, opts)
}

// ReapTests removes the Sandboxes that test processes, gone since, left
// on the host: a go test killed at its timeout leaves its Sandboxes
// running and their slots claimed. It reaps only Orphans whose owner was
// a test binary (Owner.Test), in DefaultSlotsDir, and says on stderr
// what it removed. TestMain calls it in each package that starts
// Sandboxes; it does nothing but as root.
func ReapTests(ctx context.Context) {
	if os.Geteuid() != 0 {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	orphans, err := Orphans(DefaultSlotsDir)
	if err != nil {
		log.Error("list the sandboxes dead test processes left", "err", err)
	}
	for _, o := range orphans {
		if !o.Owner.Test {
			letGo(o.StateDir) // a Runner's: kndl runner gc's to judge
			continue
		}
		if err := o.reap(ctx, log); err != nil {
			log.Error("remove the sandboxes a dead test process left", "dir", o.StateDir, "err", err)
		}
	}
}

// reap removes every Sandbox the Orphan left.
func (o Orphan) reap(ctx context.Context, log *slog.Logger) error {
	b, err := o.Open(ctx, log)
	if err != nil {
		return err
	}
	var errs []error
	for _, x := range o.Sandboxes {
		log.Warn("removing a sandbox a dead test process left", "sandbox", x.ID, "dir", o.StateDir, "pid", o.Owner.PID,
			"command", o.Owner.Command, "running", x.Running, "since", x.Since)
		if err := b.Remove(ctx, x.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
