package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/service"
)

// defaultKeep is how many backups --backup-every keeps without --keep.
const defaultKeep = 7

const hubEnvHeader = `# The kndl Hub's settings (docs/configuration.md), for kndl-hub.service.
# kndl hub install wrote it, and keeps what it holds when run again; after
# an edit, run systemctl restart kndl-hub. HUB_SECRETS_KEY unseals the
# store's secrets: keep a copy of it, apart from the store's backups.
`

const runnerEnvHeader = `# The kndl Runner's settings (docs/configuration.md), for kndl-runner.service.
# kndl runner install wrote it, and keeps what it holds when run again;
# after an edit, run systemctl restart kndl-runner. RUNNER_TOKEN is the
# Runner's credential at its Hub.
`

// installFlags are the flags every install and uninstall takes.
type installFlags struct {
	root  *string
	bin   *string
	purge *bool
}

func newInstallFlags(io cli.IO, name string, install bool) (*installFlags, *flag.FlagSet) {
	fs := cli.Flags(io, name)
	f := &installFlags{root: fs.String("root", "/", "work in this folder as the machine's root, and start nothing: for a machine image")}
	if install {
		f.bin = fs.String("bin", service.Bin, "where the kndl the units run is; this kndl is copied there unless it is that file")
	} else {
		f.purge = fs.Bool("purge", false, "also remove the settings file and the state folder, with the store or the Runner's Sandboxes' data in it")
	}
	return f, fs
}

// needRoot refuses a service command to anyone but root: it writes under
// /etc, makes a user and starts a service as root.
func needRoot(name string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("this writes the service's files under /etc and /var/lib and starts it: run it as root (sudo kndl %s)", name)
	}
	return nil
}

// settingsOf are the settings a component reads, asked of its FromEnv as
// tests/style asks, with the log level every command reads.
func settingsOf(fromEnv func(getenv func(string) string)) []string {
	names := []string{"KNDL_LOG_LEVEL"}
	fromEnv(func(name string) string {
		names = append(names, name)
		return ""
	})
	return names
}

func hubSettings() []string {
	return settingsOf(func(g func(string) string) { hub.FromEnv(g, os.TempDir()) })
}

func runnerSettings() []string {
	return settingsOf(func(g func(string) string) { runner.FromEnv(g, os.TempDir()) })
}

// mergeSettings puts into env each of names set in the command's own
// environment: what the operator gives now replaces what the file held,
// and the rest of the file stays.
func mergeSettings(env service.Env, io cli.IO, names []string) {
	for _, n := range names {
		if v := io.Getenv(n); v != "" {
			env[n] = v
		}
	}
}

func hubInstall(ctx context.Context, io cli.IO, args []string) error {
	f, fs := newInstallFlags(io, "hub install", true)
	every := fs.Duration("backup-every", 0, "back the store up this often into "+service.HubBackups+" (a systemd timer), e.g. 24h")
	keep := fs.Int("keep", 0, fmt.Sprintf("with --backup-every: how many backups to keep, the newest (default %d)", defaultKeep))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	if err := needRoot("hub install"); err != nil {
		return err
	}
	switch {
	case *keep != 0 && *every == 0:
		return errors.New("--keep counts the backups --backup-every makes: give --backup-every too (--backup-every 24h --keep 7)")
	case *every < 0 || (*every > 0 && (*every < time.Minute || *every%time.Second != 0)):
		return fmt.Errorf("--backup-every %s: want whole seconds, a minute or more (24h, 6h, 90m)", *every)
	case *keep < 0:
		return fmt.Errorf("--keep %d: want 1 or more", *keep)
	case *every > 0 && *keep == 0:
		*keep = defaultKeep
	}
	m := service.Machine{Root: *f.root}
	env, err := m.ReadEnv(service.HubEnv)
	if err != nil {
		return err
	}
	kept := env["HUB_SECRETS_KEY"]
	mergeSettings(env, io, hubSettings())
	if kept != "" && env["HUB_SECRETS_KEY"] != kept {
		return fmt.Errorf("HUB_SECRETS_KEY differs from the one in %s, which the store is sealed with: a new key would leave the store's secrets unreadable; run this without it set (or edit the file by hand, if the store is new)", service.HubEnv)
	}
	env["KNDL_HOME"] = service.HubState
	made := env["HUB_SECRETS_KEY"] == ""
	if made {
		env["HUB_SECRETS_KEY"] = seal.NewKey()
	}
	if _, err := seal.ParseKey(env["HUB_SECRETS_KEY"]); err != nil {
		return err
	}
	cfg := hub.FromEnv(func(n string) string { return env[n] }, service.HubState)
	if err := cfg.Check(); err != nil {
		return err
	}
	if *every > 0 && cfg.DatabaseURL != "" {
		return errors.New("--backup-every backs up a SQLite store, and this Hub's is PostgreSQL (HUB_DATABASE_URL): back it up with pg_dump on a schedule of yours (docs/operating.md)")
	}
	body, err := env.Render(hubEnvHeader)
	if err != nil {
		return err
	}
	units := service.Hub{Bin: *f.bin, BackupEvery: *every, Keep: *keep, BindLowPorts: lowPort(cfg.Listen) || lowPort(cfg.Front.HTTPListen)}
	if err := writeService(m, io, *f.bin, append(units.Files(), service.File{Path: service.HubEnv, Mode: 0o600, Body: body})); err != nil {
		return err
	}
	if made {
		fmt.Fprintf(io.Stdout, "Made a new HUB_SECRETS_KEY in %s: it seals the store's secrets, and without it they are lost. Keep a copy somewhere safe, apart from the store's backups.\n", service.HubEnv)
	}
	if err := m.AddUser(service.HubUsersConf); err != nil {
		return err
	}
	if err := makeState(m, service.HubState); err != nil {
		return err
	}
	if *every == 0 {
		if err := removeUnits(m, io, service.BackupTimer, service.BackupUnit); err != nil {
			return err
		}
	}
	start := []string{service.HubUnit}
	if *every > 0 {
		start = append(start, service.BackupTimer)
		fmt.Fprintf(io.Stdout, "%s backs the store up every %s into %s, keeping the newest %d; the first 15 minutes after it starts.\n",
			service.BackupTimer, service.Span(*every), service.HubBackups, *keep)
	}
	return enable(m, io, start, "journalctl -u kndl-hub shows its log, with the Setup link on a Hub that has no Owner yet")
}

func runnerInstall(ctx context.Context, io cli.IO, args []string) error {
	f, fs := newInstallFlags(io, "runner install", true)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	if err := needRoot("runner install"); err != nil {
		return err
	}
	m := service.Machine{Root: *f.root}
	env, err := m.ReadEnv(service.RunnerEnv)
	if err != nil {
		return err
	}
	mergeSettings(env, io, runnerSettings())
	env["KNDL_HOME"] = service.RunnerState
	if env["RUNNER_HOME"] == "" {
		env["RUNNER_HOME"] = service.RunnerState
	}
	for _, n := range []string{"KNDL_HUB_URL", "RUNNER_TOKEN"} {
		if env[n] == "" {
			return fmt.Errorf("%s is not set: pair the Runner first (kndl runner token create --name NAME on the Hub's machine, or the Runners page), then run, as root: RUNNER_TOKEN=kndlr_… KNDL_HUB_URL=https://… kndl runner install", n)
		}
	}
	if _, err := runner.FromEnv(func(n string) string { return env[n] }, service.RunnerState); err != nil {
		return err
	}
	body, err := env.Render(runnerEnvHeader)
	if err != nil {
		return err
	}
	units := service.Runner{Bin: *f.bin}
	if err := writeService(m, io, *f.bin, append(units.Files(), service.File{Path: service.RunnerEnv, Mode: 0o600, Body: body})); err != nil {
		return err
	}
	if err := makeState(m, service.RunnerState); err != nil {
		return err
	}
	return enable(m, io, []string{service.RunnerUnit}, "journalctl -u kndl-runner shows its log; a stop or restart leaves its Sessions' Sandboxes running")
}

// writeService copies this kndl to bin and writes files.
func writeService(m service.Machine, io cli.IO, bin string, files []service.File) error {
	copied, err := m.CopyBinary(bin)
	if err != nil {
		return err
	}
	if copied {
		fmt.Fprintf(io.Stdout, "Copied this kndl to %s.\n", bin)
	}
	var names []string
	for _, f := range files {
		if err := m.Write(f); err != nil {
			return err
		}
		names = append(names, fmt.Sprintf("%s (%04o)", f.Path, f.Mode))
	}
	fmt.Fprintf(io.Stdout, "Wrote %s.\n", strings.Join(names, ", "))
	return nil
}

// makeState makes a service's state folder, 0700, under StateRoot, which
// stays o+x: the Hub's user reaches its folder through it, and crun
// reaches a Sandbox's root filesystem in /var/lib/kndl/oci as the
// Sandbox's root. systemd gives the folder to the unit's user at start.
func makeState(m service.Machine, dir string) error {
	top := m.Path(service.StateRoot)
	if err := os.MkdirAll(top, 0o711); err != nil {
		return err
	}
	if st, err := os.Stat(top); err != nil {
		return err
	} else if st.Mode().Perm()&0o001 == 0 {
		if err := os.Chmod(top, st.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	return os.MkdirAll(m.Path(dir), 0o700)
}

// enable enables units and, where systemd runs this machine, starts them
// (a restart, for one running: an install run again takes effect).
func enable(m service.Machine, io cli.IO, units []string, log string) error {
	if !m.Live() {
		if err := m.Systemctl(append([]string{"enable"}, units...)...); err != nil {
			return err
		}
		why := "systemd does not run this machine (no /run/systemd/system)"
		if m.Root != "/" {
			why = "--root names a folder, not this machine"
		}
		fmt.Fprintf(io.Stdout, "Enabled %s, for the machine's next boot; started nothing: %s.\n", strings.Join(units, " and "), why)
		return nil
	}
	for _, args := range [][]string{{"daemon-reload"}, append([]string{"enable"}, units...), append([]string{"restart"}, units...)} {
		if err := m.Systemctl(args...); err != nil {
			return err
		}
	}
	fmt.Fprintf(io.Stdout, "Enabled and started %s: %s.\n", strings.Join(units, " and "), log)
	return nil
}

// removeUnits stops, disables and removes those of units whose files
// exist.
func removeUnits(m service.Machine, io cli.IO, units ...string) error {
	var there []string
	for _, u := range units {
		if _, err := os.Stat(m.Path(service.UnitDir + "/" + u)); err == nil {
			there = append(there, u)
		}
	}
	if len(there) == 0 {
		return nil
	}
	args := append([]string{"disable"}, there...)
	if m.Live() {
		args = append([]string{"disable", "--now"}, there...)
	}
	if err := m.Systemctl(args...); err != nil {
		return err
	}
	for _, u := range there {
		if _, err := m.Remove(service.UnitDir + "/" + u); err != nil {
			return err
		}
	}
	if m.Live() {
		if err := m.Systemctl("daemon-reload"); err != nil {
			return err
		}
	}
	done := "Disabled and removed"
	if m.Live() {
		done = "Stopped, disabled and removed"
	}
	fmt.Fprintf(io.Stdout, "%s %s.\n", done, strings.Join(there, ", "))
	return nil
}

func hubUninstall(ctx context.Context, io cli.IO, args []string) error {
	return uninstall(io, args, "hub", []string{service.HubUnit, service.BackupTimer, service.BackupUnit},
		service.HubEnv, service.HubState, service.HubUsersConf)
}

func runnerUninstall(ctx context.Context, io cli.IO, args []string) error {
	return uninstall(io, args, "runner", []string{service.RunnerUnit}, service.RunnerEnv, service.RunnerState, "")
}

// uninstall removes a service's units and keeps its settings and state
// (the store, and the key that unseals it), unless --purge.
func uninstall(io cli.IO, args []string, what string, units []string, envFile, state, usersConf string) error {
	f, fs := newInstallFlags(io, what+" uninstall", false)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	if err := needRoot(what + " uninstall"); err != nil {
		return err
	}
	m := service.Machine{Root: *f.root}
	if *f.purge {
		// Before anything, so a refusal leaves the service as it was.
		if err := m.Unmounted(state); err != nil {
			return err
		}
	}
	if err := removeUnits(m, io, units...); err != nil {
		return err
	}
	if !*f.purge {
		fmt.Fprintf(io.Stdout, "Kept %s and %s: kndl %s install runs on them again; --purge removes them.\n", envFile, state, what)
		return nil
	}
	if err := m.RemoveState(state); err != nil {
		return err
	}
	for _, p := range []string{envFile, usersConf} {
		if p != "" {
			if _, err := m.Remove(p); err != nil {
				return err
			}
		}
	}
	os.Remove(m.Path(service.ConfigDir)) // only if nothing else is in it
	fmt.Fprintf(io.Stdout, "Removed %s and %s.\n", envFile, state)
	return nil
}

// lowPort reports whether addr (host:port) names a port below 1024, which
// only a process with CAP_NET_BIND_SERVICE may listen on.
func lowPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(port)
	return err == nil && err2 == nil && n > 0 && n < 1024
}
