package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// runnerGC is kndl runner gc: it stops and removes the Sandboxes on this
// host that a Runner or a test process left when it died for good, and
// frees their slots (oci.Orphans), asking before each unless --yes.
func runnerGC(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "runner gc")
	yes := fs.Bool("yes", false, "stop and remove each one without asking")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	if os.Geteuid() != 0 {
		return errors.New("this stops Sandboxes and frees their slots on this host: run it as root (sudo kndl runner gc)")
	}
	orphans, err := oci.Orphans(oci.DefaultSlotsDir)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	backends := map[string]*oci.OCI{}
	return collect(io, orphans, *yes, func(o oci.Orphan, id string) error {
		b := backends[o.StateDir]
		if b == nil {
			if b, err = o.Open(ctx, log); err != nil {
				return err
			}
			backends[o.StateDir] = b
		}
		if err := b.Remove(ctx, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			return err
		}
		return nil
	})
}

// collect says what each orphaned Sandbox was and, once the person says
// yes (or with yes), removes it.
func collect(io cli.IO, orphans []oci.Orphan, yes bool, remove func(o oci.Orphan, id string) error) error {
	if len(orphans) == 0 {
		fmt.Fprintln(io.Stdout, "No Sandbox on this host was left by a Runner or test process that is gone.")
		return nil
	}
	in := bufio.NewReader(io.Stdin)
	removed, kept := 0, 0
	for _, o := range orphans {
		fmt.Fprintf(io.Stdout, "%s\n  %s\n", o.StateDir, ownerText(o.Owner))
		for _, x := range o.Sandboxes {
			fmt.Fprintf(io.Stdout, "  Sandbox %s (%s), %s\n", x.ID, sandboxWhat(x.ID), sinceText(x))
			if !yes {
				fmt.Fprintf(io.Stdout, "  Stop and remove it with its disks, freeing slot %d? [y/N] ", x.Slot)
				answer, _ := in.ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					kept++
					continue
				}
			}
			if err := remove(o, x.ID); err != nil {
				return fmt.Errorf("remove sandbox %s of %s: %w", x.ID, o.StateDir, err)
			}
			removed++
			fmt.Fprintf(io.Stdout, "  Removed; slot %d is free.\n", x.Slot)
		}
	}
	fmt.Fprintf(io.Stdout, "Removed %d Sandboxes, kept %d.\n", removed, kept)
	return nil
}

// ownerText says whose an orphan was.
func ownerText(w oci.Owner) string {
	switch {
	case w.PID == 0:
		return "Left by a process that no longer holds it, from a kndl before owners were registered."
	case w.Test:
		return fmt.Sprintf("Left by test process %d (%s), there since %s, now gone.", w.PID, w.Command, w.Since.Format("2006-01-02 15:04 UTC"))
	}
	return fmt.Sprintf("Left by process %d (%s), its Runner since %s, now gone. If that Runner is only stopped and will start again, answer no: it takes its Sandboxes back.",
		w.PID, w.Command, w.Since.Format("2006-01-02 15:04 UTC"))
}

// sandboxWhat says what a Sandbox is by the name the Runner gave it
// (internal/runner's sandboxID, environment.go's "t-", internal/build's
// "build-").
func sandboxWhat(id string) string {
	switch {
	case strings.HasPrefix(id, "s-"):
		return "Session " + strings.TrimPrefix(id, "s-")
	case strings.HasPrefix(id, "t-"):
		return "Test build " + strings.TrimPrefix(id, "t-")
	case strings.HasPrefix(id, "build-"):
		return "an Environment's Build"
	}
	return "not a Runner's"
}

func sinceText(x oci.Orphaned) string {
	if x.Running {
		return "running since " + x.Since.Format("2006-01-02 15:04 UTC")
	}
	return "stopped since " + x.Since.Format("2006-01-02 15:04 UTC")
}
