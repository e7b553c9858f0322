package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox/gvisor"
	"kndl.dev/kndl/internal/service"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/install")

// goldenKey is the HUB_SECRETS_KEY the golden Hub is installed with, so
// its environment file is the same bytes each run.
const goldenKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// installCases are the installs the golden files pin: each command's
// files, from the settings in its environment.
var installCases = []struct {
	name  string
	env   map[string]string
	args  []string
	units []string // enabled, in the folder systemctl enable links them from
}{
	{"hub", map[string]string{"HUB_SECRETS_KEY": goldenKey, "HUB_PUBLIC_URL": "https://kndl.example.com", "KNDL_LOG_LEVEL": "info", "PATH": "/bin"},
		[]string{"hub", "install"}, []string{"multi-user.target.wants/" + service.HubUnit}},
	{"hub-backups", map[string]string{"HUB_SECRETS_KEY": goldenKey, "HUB_PUBLIC_URL": "https://kndl.example.com"},
		[]string{"hub", "install", "--backup-every", "24h", "--keep", "7"},
		[]string{"multi-user.target.wants/" + service.HubUnit, "timers.target.wants/" + service.BackupTimer}},
	{"hub-https", map[string]string{"HUB_SECRETS_KEY": goldenKey, "HUB_PUBLIC_URL": "https://kndl.example.com", "HUB_TLS": "auto", "HUB_LISTEN": ":443"},
		[]string{"hub", "install"}, []string{"multi-user.target.wants/" + service.HubUnit}},
	{"runner", map[string]string{"KNDL_HUB_URL": "https://kndl.example.com", "RUNNER_TOKEN": "kndlr_golden", "RUNNER_NAME": "box 1"},
		[]string{"runner", "install"}, []string{"multi-user.target.wants/" + service.RunnerUnit}},
}

// install runs an install into a new folder standing for a machine's root
// and returns it.
func install(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	root := t.TempDir()
	if code, out, errOut := kndl(env, append(args, "--root", root)...); code != 0 {
		t.Fatalf("kndl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return root
}

// TestInstallWritesTheGoldenFiles: kndl hub install and kndl runner
// install write their units 0644 and their environment files 0600, byte for
// byte as testdata/install holds them (go test -update rewrites those),
// make the state folder 0700 and the Hub's user, and enable the units.
func TestInstallWritesTheGoldenFiles(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "systemctl", "systemd-sysusers")
	for _, tt := range installCases {
		t.Run(tt.name, func(t *testing.T) {
			root := install(t, tt.env, tt.args...)
			golden := filepath.Join("testdata", "install", tt.name)
			var got []string
			for _, p := range []string{"etc/kndl", "etc/sysusers.d", "etc/systemd/system"} {
				filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() {
						rel, _ := filepath.Rel(root, path)
						got = append(got, rel)
					}
					return nil
				})
			}
			slices.Sort(got)
			if *update {
				os.RemoveAll(golden)
				for _, rel := range got {
					b, _ := os.ReadFile(filepath.Join(root, rel))
					os.MkdirAll(filepath.Dir(filepath.Join(golden, rel)), 0o755)
					if err := os.WriteFile(filepath.Join(golden, rel), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var want []string
			filepath.WalkDir(golden, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					rel, _ := filepath.Rel(golden, path)
					want = append(want, rel)
				}
				return nil
			})
			if !slices.Equal(got, want) {
				t.Fatalf("files written: got %q, want %q", got, want)
			}
			for _, rel := range got {
				b, _ := os.ReadFile(filepath.Join(root, rel))
				w, _ := os.ReadFile(filepath.Join(golden, rel))
				if !bytes.Equal(b, w) {
					t.Errorf("%s: got\n%s\nwant (go test -update rewrites it)\n%s", rel, b, w)
				}
				mode := fs.FileMode(0o644)
				if strings.HasPrefix(rel, "etc/kndl/") {
					mode = 0o600
				}
				if st, _ := os.Stat(filepath.Join(root, rel)); st.Mode().Perm() != mode {
					t.Errorf("%s: mode %04o, want %04o", rel, st.Mode().Perm(), mode)
				}
			}
			for _, u := range tt.units {
				if _, err := os.Readlink(filepath.Join(root, service.UnitDir, u)); err != nil {
					t.Errorf("%s: not enabled: %v", u, err)
				}
			}
			state := service.HubState
			if tt.name == "runner" {
				state = service.RunnerState
			}
			if st, err := os.Stat(filepath.Join(root, state)); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("state folder %s: %v, %v; want mode 0700", state, st, err)
			}
			if st, err := os.Stat(filepath.Join(root, service.StateRoot)); err != nil || st.Mode().Perm()&0o001 == 0 {
				t.Errorf("%s: %v, %v; want o+x, for the Hub's user and crun to pass", service.StateRoot, st, err)
			}
			if tt.name != "runner" {
				if b, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(b), service.HubUser+":x:") {
					t.Errorf("etc/passwd: got %q, want the user %s", b, service.HubUser)
				}
			}
		})
	}
}

// TestTheUnitsPassSystemdAnalyzeVerify: systemd-analyze verify finds
// nothing to say of each unit, with the kndl it runs in place. It runs
// without systemd as PID 1: --root names the installed folder, which gets
// the host's own units (sysinit.target and the rest a service's default
// dependencies name) in its usr/lib/systemd/system.
func TestTheUnitsPassSystemdAnalyzeVerify(t *testing.T) {
	testenv.RequireRoot(t)
	analyze := testenv.RequireCommand(t, "systemd-analyze", "systemctl", "systemd-sysusers")
	for _, tt := range installCases {
		t.Run(tt.name, func(t *testing.T) {
			root := install(t, tt.env, tt.args...)
			os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755)
			if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
				t.Fatalf("copy the host's units: %v %s", err, out)
			}
			var units []string
			ents, _ := os.ReadDir(filepath.Join(root, service.UnitDir))
			for _, e := range ents {
				if e.Type().IsRegular() {
					units = append(units, e.Name())
				}
			}
			out, err := exec.Command(analyze, append([]string{"verify", "--root=" + root}, units...)...).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("systemd-analyze verify %s: %v, said %q; want nothing said", units, err, out)
			}
		})
	}
}

// TestTheHubsUnitPassesSystemdsSecurityReview: systemd-analyze security
// rates the Hub's unit, and its backup's, "OK" (exposure at most 2.0 of
// 10). The Runner's, which runs as root for its Sandboxes, is not held to
// it (docs/security.md says what it has and lacks).
func TestTheHubsUnitPassesSystemdsSecurityReview(t *testing.T) {
	testenv.RequireRoot(t)
	analyze := testenv.RequireCommand(t, "systemd-analyze", "systemctl", "systemd-sysusers")
	root := install(t, installCases[1].env, installCases[1].args...)
	for _, u := range []string{service.HubUnit, service.BackupUnit} {
		out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=20", "--root="+root, u).CombinedOutput()
		i := bytes.LastIndex(out, []byte("Overall exposure level"))
		if err != nil || i < 0 {
			t.Errorf("systemd-analyze security %s: %v; want exposure 2.0 or less:\n%s", u, err, out)
		} else {
			t.Logf("%s", bytes.TrimSpace(out[i:]))
		}
	}
}

// TestInstallKeepsTheSecretsKey: the first install makes HUB_SECRETS_KEY
// and says so; the next keeps it and says nothing of it; one asked to
// change it refuses and changes nothing.
func TestInstallKeepsTheSecretsKey(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "systemctl", "systemd-sysusers")
	root := t.TempDir()
	run := func(env map[string]string) (int, string, string) {
		return kndl(env, "hub", "install", "--root", root)
	}
	key := func() string {
		env, err := service.Machine{Root: root}.ReadEnv(service.HubEnv)
		if err != nil {
			t.Fatal(err)
		}
		return env["HUB_SECRETS_KEY"]
	}
	code, out, errOut := run(map[string]string{})
	first := key()
	if code != 0 || !strings.Contains(out, "Made a new HUB_SECRETS_KEY") || first == "" {
		t.Fatalf("first install: exit %d, key %q\n%s%s; want a key made, and said", code, first, out, errOut)
	}
	code, out, errOut = run(map[string]string{"HUB_PUBLIC_URL": "https://kndl.example.com"})
	if code != 0 || strings.Contains(out, "Made a new") || key() != first {
		t.Fatalf("second install: exit %d, key kept %v\n%s%s; want the first key kept, nothing said of it", code, key() == first, out, errOut)
	}
	before, _ := os.ReadFile(filepath.Join(root, service.HubEnv))
	code, _, errOut = run(map[string]string{"HUB_SECRETS_KEY": goldenKey})
	after, _ := os.ReadFile(filepath.Join(root, service.HubEnv))
	if code != 1 || !strings.Contains(errOut, "HUB_SECRETS_KEY differs") || !bytes.Equal(before, after) {
		t.Fatalf("install with another key: exit %d, %q, file changed %v; want refused, nothing changed", code, errOut, !bytes.Equal(before, after))
	}
}

// TestUninstallKeepsTheDataUnlessPurge: uninstall removes the units and
// keeps the settings and the state folder; --purge removes them too.
func TestUninstallKeepsTheDataUnlessPurge(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "systemctl", "systemd-sysusers")
	for _, tt := range installCases {
		t.Run(tt.name, func(t *testing.T) {
			root := install(t, tt.env, tt.args...)
			what, envFile, state := tt.args[0], service.HubEnv, service.HubState
			if what == "runner" {
				envFile, state = service.RunnerEnv, service.RunnerState
			}
			data := filepath.Join(root, state, "hub.db")
			if err := os.WriteFile(data, []byte("data"), 0o600); err != nil {
				t.Fatal(err)
			}
			if code, out, errOut := kndl(nil, what, "uninstall", "--root", root); code != 0 || !strings.Contains(out, "Kept") {
				t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
			}
			ents, _ := os.ReadDir(filepath.Join(root, service.UnitDir))
			for _, e := range ents {
				if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
					t.Errorf("after uninstall %s is left in %s", e.Name(), service.UnitDir)
				}
			}
			for _, p := range []string{data, filepath.Join(root, envFile)} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("after uninstall: %v; want it kept", err)
				}
			}
			if code, out, errOut := kndl(nil, what, "uninstall", "--purge", "--root", root); code != 0 {
				t.Fatalf("uninstall --purge: exit %d\n%s%s", code, out, errOut)
			}
			for _, p := range []string{state, envFile, service.ConfigDir} {
				if _, err := os.Stat(filepath.Join(root, p)); err == nil {
					t.Errorf("after uninstall --purge %s is left", p)
				}
			}
		})
	}
}

// TestTheServiceCommandsRefuseWithoutRoot: run by another user, each
// install and uninstall says it needs root and writes nothing.
func TestTheServiceCommandsRefuseWithoutRoot(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy the user nobody can run, in a folder it can reach.
	dir, err := os.MkdirTemp("", "kndl-noroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "kndl.test")
	if out, err := exec.Command("cp", self, exe).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	root := filepath.Join(dir, "root")
	os.Mkdir(root, 0o777)
	for _, args := range [][]string{{"hub", "install"}, {"hub", "uninstall", "--purge"}, {"runner", "install"}, {"runner", "uninstall"}} {
		cmd := exec.Command(exe)
		cmd.Env = []string{asKndl + "=" + strings.Join(append(args, "--root", root), " "), "RUNNER_TOKEN=kndlr_x", "KNDL_HUB_URL=https://kndl.example.com"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		ents, _ := os.ReadDir(root)
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "run it as root (sudo kndl "+strings.Join(args[:2], " ")) || len(ents) > 0 {
			t.Errorf("kndl %s as nobody: %v, %q, wrote %d files; want exit 1 saying to run it as root, nothing written", args, err, out, len(ents))
		}
	}
}

// TestTheBackupTimersCommandKeepsTheNewestAndRestores: the command the
// backup timer runs, taken from its unit, backs a real store up into a
// folder and keeps the newest N; a Hub's store restored from the newest
// holds all it held.
func TestTheBackupTimersCommandKeepsTheNewestAndRestores(t *testing.T) {
	ctx := context.Background()
	var execStart string
	for _, f := range (service.Hub{Bin: service.Bin, BackupEvery: 24 * 60 * 60 * 1e9, Keep: 2}).Files() {
		if strings.HasSuffix(f.Path, service.BackupUnit) {
			for line := range strings.Lines(f.Body) {
				if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
					execStart = strings.TrimSpace(v)
				}
			}
		}
	}
	args := strings.Fields(execStart)
	if len(args) < 2 || args[0] != service.Bin {
		t.Fatalf("the backup unit's ExecStart %q: want %s and its arguments", execStart, service.Bin)
	}
	backups := t.TempDir()
	for i, a := range args {
		if a == service.HubBackups {
			args[i] = backups
		}
	}
	home := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(home, "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close() // open while the backups run, as a Hub's is
	os.WriteFile(filepath.Join(backups, "notes.txt"), []byte("not a backup"), 0o600)
	names := []string{"box-1", "box-2", "box-3"}
	for _, name := range names {
		if _, _, err := st.Runners.CreateRunner(ctx, name, ""); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := kndl(map[string]string{"KNDL_HOME": home}, args[1:]...); code != 0 {
			t.Fatalf("kndl %s: exit %d\n%s%s", strings.Join(args[1:], " "), code, out, errOut)
		}
	}
	ents, _ := os.ReadDir(backups)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != 3 || got[2] != "notes.txt" || !backupFile.MatchString(got[0]) || !backupFile.MatchString(got[1]) {
		t.Fatalf("the folder holds %q; want the 2 newest backups and notes.txt", got)
	}
	// A restore, as docs/operating.md has it: the Hub stopped, the newest
	// backup copied over its store.
	restored := t.TempDir()
	b, err := os.ReadFile(filepath.Join(backups, got[1]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "hub.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rs, _, err := storeOnThisMachine(ctx, cli.IO{Getenv: func(k string) string { return map[string]string{"KNDL_HOME": restored}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	runners, err := rs.Runners.List(ctx)
	var have []string
	for _, r := range runners {
		have = append(have, r.Name)
	}
	slices.Sort(have)
	if err != nil || !slices.Equal(have, names) {
		t.Fatalf("the restored store's Runners: got %q (%v), want %q", have, err, names)
	}
}

// TestKndlVersionNamesTheBuildAndWhatItPins: kndl version prints the Go
// that built it, the protocol's versions and the Claude Code and runsc it
// pins, in words and as JSON.
func TestKndlVersionNamesTheBuildAndWhatItPins(t *testing.T) {
	code, out, errOut := kndl(nil, "version")
	want := []string{runtime.Version(), fmt.Sprintf("protocol    %d (takes Runners from %d)", protocol.Version, protocol.MinVersion), "claude code " + claude.Version, "runsc       " + gvisor.Version}
	for _, w := range want {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("kndl version: exit %d, got\n%s%s\nwant it to hold %q", code, out, errOut, w)
		}
	}
	code, out, _ = kndl(nil, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Protocol != protocol.Version || v.ClaudeCode != claude.Version || v.Runsc != gvisor.Version || v.Go != runtime.Version() {
		t.Errorf("kndl version --json: exit %d, %v, got %+v", code, err, v)
	}
}
