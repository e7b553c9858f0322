package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/protocol"
)

// envCommand reads --repo and --json, then runs fn with the Repo's id.
func envCommand(name string, more func(fs *flag.FlagSet) func() error, fn func(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error) func(context.Context, IO, []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, name)
		repo := fs.String("repo", "", "the Repo (its URL or path)")
		asJSON := fs.Bool("json", false, "print JSON")
		var check func() error
		if more != nil {
			check = more(fs)
		}
		pos, err := Parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 0 || *repo == "" {
			return ErrUsage
		}
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		c, err := apiclient.New()
		if err != nil {
			return err
		}
		r, err := repoOf(ctx, c, *repo)
		if err != nil {
			return err
		}
		return fn(ctx, io, c, r.ID, *asJSON)
	}
}

func envShow(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	e, err := c.Environment(ctx, repo)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, e)
	}
	if e.Current.Version == 0 {
		fmt.Fprintf(io.Stdout, "Environment: no version yet; Sessions run on the Runner's defaults.\n")
	} else {
		fmt.Fprintf(io.Stdout, "Environment version %d (applied %s)\n", e.Current.Version, e.Current.CreatedAt.Format(time.RFC3339))
	}
	printSettings(io, e.Current.Settings)
	if e.Follows != "" {
		fmt.Fprintf(io.Stdout, "  follows:            %s (a push changing it makes a new draft)\n", e.Follows)
	}
	if d := e.Draft; d != nil {
		fmt.Fprintf(io.Stdout, "\nDraft from version %d (edited %s):\n", d.BaseVersion, d.UpdatedAt.Format(time.RFC3339))
		if d.From != nil {
			fmt.Fprintf(io.Stdout, "  made from %s at commit %s\n", d.From.Path, d.From.Commit)
			for _, n := range d.From.Notes {
				fmt.Fprintf(io.Stdout, "  note: %s\n", n)
			}
		}
		for _, ch := range d.Changes {
			fmt.Fprintf(io.Stdout, "  %s\n", ch)
		}
		switch {
		case !d.NeedsTest:
			fmt.Fprintf(io.Stdout, "It leaves the Build as it is: kndl env apply applies it now.\n")
		case d.Test == nil:
			fmt.Fprintf(io.Stdout, "It changes the Build: kndl env test must pass before kndl env apply.\n")
		default:
			fmt.Fprintf(io.Stdout, "It changes the Build; its Test build %s %s.\n", d.Test.ID, d.Test.State)
		}
	}
	return nil
}

func printSettings(io IO, s api.EnvironmentSettings) {
	fmt.Fprintf(io.Stdout, "  image:              %s\n  features:           %s\n  bootstrap:          %s\n  start:              %s\n  docker:             %s\n  dependency folders: %s\n  next to:            %s\n  cpus:               %s\n  memory:             %s\n  egress:             %s\n  check:              %s\n  ports:              %s\n  container env:      %s\n  user:               %s\n",
		or(s.Image, "the Runner's default"), featureRefs(s.Features), scriptLines(s.Bootstrap), scriptLines(s.Start), onOff(s.Docker),
		or(strings.Join(s.DependencyFolders, ", "), "none"), or(strings.Join(api.NextToList(s.NextTo), ", "), "none"),
		orNumber(s.CPUs, ""), orNumber(float64(s.MemoryMiB), " MiB"), api.EgressLine(s.Egress), or(s.CheckCommand, "none"), api.PortsLine(s.Ports),
		or(strings.Join(api.EnvNames(s.ContainerEnv), ", "), "none"), or(s.User, "root"))
}

// featureRefs names the Features in their install order.
func featureRefs(fs []protocol.Feature) string {
	var refs []string
	for _, f := range fs {
		refs = append(refs, f.Ref)
	}
	return or(strings.Join(refs, ", "), "none")
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func scriptLines(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%d lines", strings.Count(strings.TrimSuffix(s, "\n"), "\n")+1)
}

func orNumber(v float64, unit string) string {
	if v == 0 {
		return "the Runner's default"
	}
	return fmt.Sprintf("%g%s", v, unit)
}

// envEdit's flags: each one given changes that setting of the draft (or of
// the current version, when there is no draft).
type envEditFlags struct {
	file, image, bootstrap, start *string
	check                         *string
	folders, nextTo, ports        *string
	docker                        *bool
	cpus                          *float64
	memory                        *int
	egress                        *string
	allow                         []string
	from                          devcontainerFlag
	follow                        *bool
	set                           map[string]bool
}

// devcontainerFlag is --from-devcontainer, alone for the usual places or
// =PATH for the file at PATH.
type devcontainerFlag struct {
	on   bool
	path string
}

func (d *devcontainerFlag) String() string   { return d.path }
func (d *devcontainerFlag) IsBoolFlag() bool { return true }
func (d *devcontainerFlag) Set(v string) error {
	d.on, d.path = true, v
	if v == "true" {
		d.path = ""
	}
	return nil
}

func (f *envEditFlags) define(fs *flag.FlagSet) func() error {
	f.file = fs.String("file", "", "a JSON file of the whole settings (as kndl env show --json prints them); flags given change it further")
	f.image = fs.String("image", "", "the image (tag or digest); \"\" for the Runner's default")
	f.bootstrap = fs.String("bootstrap-file", "", "a file holding the Bootstrap script (- for stdin, \"\" for none)")
	f.start = fs.String("start-file", "", "a file holding the Start script (- for stdin, \"\" for none)")
	f.check = fs.String("check", "", "a command, such as 'make test', run in each attempt's Sandbox after its Turn to rank the attempts (\"\" for none)")
	f.docker = fs.Bool("docker", false, "run Docker in each Sandbox, installed in the Build (--docker=false to turn it off)")
	f.folders = fs.String("dependency-folders", "", "comma-separated names or globs of folders kept on the dependency disk, such as node_modules,.venv (\"\" for none)")
	f.nextTo = fs.String("next-to", "", "comma-separated file=folder, a dependency folder bound beside each such file before it exists, such as package.json=node_modules (\"\" for none)")
	f.ports = fs.String("ports", "", "comma-separated port or port=label, offered with its label in each Session's view before anything listens on it, such as 3000=Web app,8080 (\"\" for none)")
	f.cpus = fs.Float64("cpus", 0, "CPUs for each Sandbox (0: the Runner's default)")
	f.memory = fs.Int("memory", 0, "memory in MiB for each Sandbox (0: the Runner's default)")
	f.egress = fs.String("egress", "", "what each Sandbox reaches: open (the internet) or allowlist (its relay and the --allow hosts only)")
	fs.Func("allow", "under --egress allowlist, a host, a wildcard domain (*.example.com) or a preset (debian, npm, pypi, go, github, crates, docker); repeat it or separate with commas; none is on unless listed (git and gh go through the Runner's relay); the list replaces the draft's (\"\" for none)", func(v string) error {
		f.allow = append(f.allow, commaList(v)...)
		return nil
	})
	f.follow = fs.Bool("follow", false, "with --from-devcontainer: a push changing the file makes a new draft and starts its Test build (--follow=false to stop)")
	fs.Var(&f.from, "from-devcontainer", "make the draft from the Repo's devcontainer.json at its default branch: .devcontainer/devcontainer.json, then .devcontainer.json, or =PATH")
	return func() error {
		f.set = map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
		switch {
		case f.set["follow"] && !f.from.on:
			return fmt.Errorf("--follow goes with --from-devcontainer: it follows the file the draft is made from")
		case f.from.on && f.any():
			return fmt.Errorf("--from-devcontainer makes the draft from the file alone: change it further with another kndl env edit")
		case f.from.on:
		case !f.any():
			return fmt.Errorf("say what to change: --from-devcontainer, --file, --image, --bootstrap-file, --start-file, --docker, --dependency-folders, --next-to, --ports, --cpus, --memory, --egress, --allow or --check")
		}
		return nil
	}
}

func (f *envEditFlags) any() bool {
	for _, n := range []string{"file", "image", "bootstrap-file", "start-file", "docker", "dependency-folders", "next-to", "ports", "cpus", "memory", "egress", "allow", "check"} {
		if f.set[n] {
			return true
		}
	}
	return false
}

func (f *envEditFlags) run(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	if f.from.on {
		var follow *bool
		if f.set["follow"] {
			follow = f.follow
		}
		e, err := c.EnvironmentFromDevcontainer(ctx, repo, api.FromDevcontainer{Path: f.from.path, Follow: follow})
		switch {
		case err != nil:
			return err
		case asJSON:
			return printJSON(io, e)
		}
		return envShow(ctx, io, c, repo, false)
	}
	e, err := c.Environment(ctx, repo)
	if err != nil {
		return err
	}
	s := e.Current.Settings
	if e.Draft != nil {
		s = e.Draft.Settings
	}
	if f.set["file"] {
		b, err := os.ReadFile(*f.file)
		if err != nil {
			return err
		}
		// Whole: a field it leaves out is the Runner's default. The Hub
		// refuses a field it does not know.
		s = api.EnvironmentSettings{}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("%s is not the JSON of an Environment's settings: %v", *f.file, err)
		}
	}
	if f.set["image"] {
		s.Image = *f.image
	}
	for name, dst := range map[string]*string{"bootstrap-file": &s.Bootstrap, "start-file": &s.Start} {
		if !f.set[name] {
			continue
		}
		file := *f.bootstrap
		if name == "start-file" {
			file = *f.start
		}
		text, err := readScript(io, file)
		if err != nil {
			return err
		}
		*dst = text
	}
	if f.set["docker"] {
		s.Docker = *f.docker
	}
	if f.set["dependency-folders"] {
		s.DependencyFolders = commaList(*f.folders)
	}
	if f.set["next-to"] {
		s.NextTo = nil
		for _, kv := range commaList(*f.nextTo) {
			file, folder, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--next-to %q: want file=folder, such as package.json=node_modules", kv)
			}
			if s.NextTo == nil {
				s.NextTo = map[string]string{}
			}
			s.NextTo[strings.TrimSpace(file)] = strings.TrimSpace(folder)
		}
	}
	if f.set["ports"] {
		if s.Ports, err = portsFlag(*f.ports); err != nil {
			return err
		}
	}
	if f.set["cpus"] {
		s.CPUs = *f.cpus
	}
	if f.set["memory"] {
		s.MemoryMiB = *f.memory
	}
	if f.set["egress"] {
		s.Egress.Mode = *f.egress
		if *f.egress == egress.ModeOpen {
			s.Egress = egress.Policy{} // open has no list
		}
	}
	if f.set["allow"] {
		s.Egress.Allow = f.allow
	}
	if f.set["check"] {
		s.CheckCommand = *f.check
	}
	if e, err = c.EditEnvironment(ctx, repo, s); err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, e)
	}
	return envShow(ctx, io, c, repo, false)
}

// portsFlag reads --ports: port or port=label, comma-separated; the Hub
// checks the ports and labels.
func portsFlag(v string) ([]protocol.OfferedPort, error) {
	var out []protocol.OfferedPort
	for _, entry := range commaList(v) {
		port, label, _ := strings.Cut(entry, "=")
		n, err := strconv.Atoi(strings.TrimSpace(port))
		if err != nil {
			return nil, fmt.Errorf("--ports %q: want port or port=label, such as 3000=Web app", entry)
		}
		out = append(out, protocol.OfferedPort{Port: n, Label: strings.TrimSpace(label)})
	}
	return out, nil
}

// commaList splits a flag's comma-separated list; the Hub checks each
// entry.
func commaList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readScript reads a script byte for byte: from a file, from stdin with -,
// or none with "".
func readScript(io IO, file string) (string, error) {
	switch file {
	case "":
		return "", nil
	case "-":
		b, err := readAllLimited(io.Stdin, 64<<10+1)
		return string(b), err
	}
	b, err := os.ReadFile(file)
	return string(b), err
}

func envTest(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	t, err := c.TestEnvironment(ctx, repo)
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(io.Stderr, "Test build %s running on a Runner of yours; its log follows.\n", t.ID)
	}
	shown := 0
	for {
		if t, err = c.TestBuild(ctx, repo, t.ID); err != nil {
			return err
		}
		if !asJSON && len(t.Log) > shown {
			fmt.Fprint(io.Stdout, t.Log[shown:])
			shown = len(t.Log)
		}
		if t.State != "running" {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if asJSON {
		printJSON(io, t)
	}
	if t.State != "passed" {
		return errors.New("the Test build failed: " + or(t.Detail, "see its log"))
	}
	if !asJSON {
		fmt.Fprintf(io.Stdout, "The Test build passed: kndl env apply applies the draft.\n")
	}
	return nil
}

func envApply(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	v, err := c.ApplyEnvironment(ctx, repo)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, v)
	}
	fmt.Fprintf(io.Stdout, "Applied version %d. New Sessions start on it, and running ones at their next wake or restart.\n", v.Version)
	return nil
}

func envLog(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	log, err := c.EnvironmentLog(ctx, repo)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, log)
	}
	var rows [][]string
	for _, v := range log {
		rows = append(rows, []string{fmt.Sprint(v.Version), v.CreatedAt.Format(time.RFC3339), v.CreatedBy, strings.ReplaceAll(v.Changes, "\n", "; ")})
	}
	return table(io, "VERSION\tAPPLIED\tBY\tCHANGES", rows)
}

func envEditCommand() func(context.Context, IO, []string) error {
	f := &envEditFlags{}
	return envCommand("env edit", f.define, f.run)
}
