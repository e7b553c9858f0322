// Package environment is each Repo's Environment: what its Sessions' Sandboxes
// are built from and start with, in versions. A change makes a draft;
// applying a draft makes the next version. A draft that changes the Build
// applies only once a Test build of exactly its build inputs has passed.
package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Config is one version's settings, with the Hub's rules for them: the
// fields are protocol.EnvironmentSettings', declared there once.
type Config protocol.EnvironmentSettings

// Limits on a Config.
const (
	MaxScript    = 64 << 10
	MaxCPUs      = 64
	MaxMemoryMiB = 1 << 20
	// MaxPatterns and MaxPattern bound DependencyFolders and NextTo.
	MaxPatterns = 32
	MaxPattern  = 200
	// MaxCheck bounds the check command: one command line, such as make
	// test, not a script (a script goes in the Repo).
	MaxCheck = 1 << 10
	// MaxPorts and MaxPortLabel bound Ports: a label is a person's words,
	// often from a Repo file, shown in every Session's view.
	MaxPorts     = 32
	MaxPortLabel = 80 // characters
)

// imageRE is an OCI reference as the Runner's puller reads it: a name with
// an optional registry and port, then a tag or a digest or both.
var imageRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)
})

// Check refuses a Config the Runner could not use, naming the field.
func (c Config) Check() error {
	if c.Image != "" && (len(c.Image) > 255 || !imageRE().MatchString(c.Image)) {
		return fmt.Errorf("image %q is not an image reference (such as debian:12 or ghcr.io/org/img@sha256:…): %w", c.Image, errdefs.ErrInvalid)
	}
	for name, s := range map[string]string{"Bootstrap": c.Bootstrap, "Start": c.Start} {
		switch {
		case len(s) > MaxScript:
			return fmt.Errorf("the %s script is %d bytes; at most %d: %w", name, len(s), MaxScript, errdefs.ErrInvalid)
		case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
			return fmt.Errorf("the %s script is not UTF-8 text: %w", name, errdefs.ErrInvalid)
		}
	}
	if err := checkPatterns("dependency_folders", c.DependencyFolders, true); err != nil {
		return err
	}
	if len(c.NextTo) > MaxPatterns {
		return fmt.Errorf("next_to has %d files; at most %d: %w", len(c.NextTo), MaxPatterns, errdefs.ErrInvalid)
	}
	for _, file := range slices.Sorted(maps.Keys(c.NextTo)) {
		if err := checkPatterns("next_to", []string{file}, false); err != nil {
			return err
		}
		if folder := c.NextTo[file]; strings.ContainsAny(folder, "*?[") {
			return fmt.Errorf("next_to %s: the folder %q is a glob; name the one folder beside it, such as node_modules: %w", file, folder, errdefs.ErrInvalid)
		} else if err := checkPatterns("next_to "+file+": folder", []string{folder}, false); err != nil {
			return err
		}
	}
	if err := checkFeatures(c.Features); err != nil {
		return err
	}
	if c.CPUs < 0 || c.CPUs > MaxCPUs {
		return fmt.Errorf("cpus %g: want 0 (the Runner's default) up to %d: %w", c.CPUs, MaxCPUs, errdefs.ErrInvalid)
	}
	if c.MemoryMiB < 0 || c.MemoryMiB > MaxMemoryMiB {
		return fmt.Errorf("memory %d MiB: want 0 (the Runner's default) up to %d: %w", c.MemoryMiB, MaxMemoryMiB, errdefs.ErrInvalid)
	}
	if c.BranchPrefix != "" && (len(c.BranchPrefix) > MaxPattern || !branchPrefixRE().MatchString(c.BranchPrefix) || strings.Contains(c.BranchPrefix, "..") || strings.Contains(c.BranchPrefix, "/.") || strings.Contains(c.BranchPrefix, ".lock/")) {
		return fmt.Errorf("branch_prefix %q is not the start of a branch name ending in / (such as kndl/ or bots/claude/): %w", c.BranchPrefix, errdefs.ErrInvalid)
	}
	if len(c.CheckCommand) > MaxCheck || !utf8.ValidString(c.CheckCommand) || strings.ContainsFunc(c.CheckCommand, unicode.IsControl) {
		return fmt.Errorf("the check is not one line of at most %d bytes of text (such as make test; put a longer script in the Repo and name it): %w", MaxCheck, errdefs.ErrInvalid)
	}
	if err := checkPorts(c.Ports); err != nil {
		return err
	}
	if err := checkContainerEnv(c.ContainerEnv); err != nil {
		return err
	}
	if c.User != "" && !UserName().MatchString(c.User) {
		return fmt.Errorf("user %q is not a user name or uid (remoteUser, containerUser): %w", c.User, errdefs.ErrInvalid)
	}
	return c.Egress.Check()
}

// UserName is what an Environment's user may be: a name as useradd takes
// it, or a uid.
var UserName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$|^[0-9]{1,10}$`) })

// MaxContainerEnv bounds ContainerEnv's entries.
const MaxContainerEnv = 128

// checkContainerEnv refuses an entry no Variable could be: a name or a
// value over a Variable's limits, or a value with a control character
// other than tab and newline.
func checkContainerEnv(env []string) error {
	if len(env) > MaxContainerEnv {
		return fmt.Errorf("container_env has %d variables; at most %d: %w", len(env), MaxContainerEnv, errdefs.ErrInvalid)
	}
	for i, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !VariableName().MatchString(name):
			return fmt.Errorf("container_env[%d] is not NAME=value, NAME of letters, digits and _: %w", i, errdefs.ErrInvalid)
		case len(value) > MaxVariableBytes || !utf8.ValidString(value) || strings.ContainsFunc(value, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }):
			return fmt.Errorf("container_env %s: the value is over %d bytes or has a control character other than tab and newline: %w", name, MaxVariableBytes, errdefs.ErrInvalid)
		}
	}
	return nil
}

// checkPorts refuses a port that is none, one listed twice, or a label
// CheckPortLabel refuses.
func checkPorts(ps []protocol.OfferedPort) error {
	if len(ps) > MaxPorts {
		return fmt.Errorf("ports has %d ports; at most %d: %w", len(ps), MaxPorts, errdefs.ErrInvalid)
	}
	seen := map[int]bool{}
	for i, p := range ps {
		switch {
		case p.Port < 1 || p.Port > 65535:
			return fmt.Errorf("ports[%d] %d is not a port (1 to 65535): %w", i, p.Port, errdefs.ErrInvalid)
		case seen[p.Port]:
			return fmt.Errorf("ports[%d] %d is listed twice: %w", i, p.Port, errdefs.ErrInvalid)
		}
		seen[p.Port] = true
		if err := CheckPortLabel(p.Label); err != nil {
			return fmt.Errorf("ports[%d] %d: label %v: %w", i, p.Port, err, errdefs.ErrInvalid)
		}
	}
	return nil
}

// CheckPortLabel refuses a port's label over MaxPortLabel characters, or
// with a control character or a bidirectional control, either of which
// could make the label or the text around it read as something else in
// a terminal or the view.
func CheckPortLabel(label string) error {
	switch {
	case utf8.RuneCountInString(label) > MaxPortLabel:
		return fmt.Errorf("%.20q… is over %d characters", label, MaxPortLabel)
	case !utf8.ValidString(label) || strings.ContainsFunc(label, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }):
		return fmt.Errorf("%+q has a control character", label)
	}
	return nil
}

// MaxFeatures bounds an Environment's Features, dependencies included.
const MaxFeatures = 32

var (
	// featureRefRE is a Feature's artifact by digest, as the Runner pulls it.
	featureRefRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+@sha256:[0-9a-f]{64}$`)
	})
	// featureEnvRE is one of a Feature's options as install.sh reads it.
	featureEnvRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[^\x00]*$`) })
)

// checkFeatures refuses a Feature the Runner could not pull by digest, or
// an option that is no variable.
func checkFeatures(fs []protocol.Feature) error {
	if len(fs) > MaxFeatures {
		return fmt.Errorf("features has %d Features; at most %d: %w", len(fs), MaxFeatures, errdefs.ErrInvalid)
	}
	for i, f := range fs {
		if !featureRefRE().MatchString(f.Ref) {
			return fmt.Errorf("features[%d] %q is not a Feature pinned by digest (repository@sha256:…): make the draft with kndl env edit --from-devcontainer: %w", i, f.Ref, errdefs.ErrInvalid)
		}
		for _, kv := range f.Env {
			if len(kv) > 1<<10 || !featureEnvRE().MatchString(kv) || !utf8.ValidString(kv) {
				return fmt.Errorf("features[%d] %s: an option %q is not NAME=value of at most 1 KiB: %w", i, f.Ref, kv, errdefs.ErrInvalid)
			}
		}
	}
	return nil
}

// branchPrefixRE is a branch_prefix: path components of git's safe
// characters, each ending in /.
var branchPrefixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]*/)+$`) })

// checkPatterns refuses a pattern that could reach out of /workspace or
// into its .git, or that path.Match cannot read. Only DependencyFolders'
// patterns may have slashes.
func checkPatterns(field string, patterns []string, slashes bool) error {
	if len(patterns) > MaxPatterns {
		return fmt.Errorf("%s has %d patterns; at most %d: %w", field, len(patterns), MaxPatterns, errdefs.ErrInvalid)
	}
	for _, p := range patterns {
		bad := func(why string) error {
			return fmt.Errorf("%s pattern %q %s: %w", field, p, why, errdefs.ErrInvalid)
		}
		switch {
		case p == "":
			return bad("is empty")
		case len(p) > MaxPattern:
			return bad(fmt.Sprintf("is over %d bytes", MaxPattern))
		case !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) || strings.Contains(p, `\`):
			return bad("has a control character or a backslash")
		case strings.HasPrefix(p, "/"):
			return bad("is absolute; name a folder relative to /workspace, such as node_modules")
		case !slashes && strings.Contains(p, "/"):
			return bad("has a slash; name it by its name alone, such as package.json or node_modules")
		}
		for _, elem := range strings.Split(p, "/") {
			switch elem {
			case "":
				return bad("has an empty path element (a doubled or trailing slash)")
			case ".", "..":
				return bad("has a . or .. element; name a folder inside /workspace")
			case ".git":
				return bad("names .git, which stays the Workspace's")
			}
		}
		if _, err := path.Match(p, ""); err != nil {
			return bad("is not a glob (" + err.Error() + ")")
		}
	}
	return nil
}

// Parse reads a Config the store or a person wrote, refusing fields it
// does not know so a typo is not silently dropped.
func Parse(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("an Environment that is not one: %v: %w", err, errdefs.ErrInvalid)
	}
	return c, c.Check()
}

// JSON is how the store keeps a Config.
func (c Config) JSON() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// AtBuild is a Variable the Bootstrap script gets, as a build input.
type AtBuild struct{ Name, Value string }

// BuildDigest names a Config's build inputs: the image, the scripts, the
// Variables available at build, values included, Docker and the dependency
// folders. Resources are not among them. A Test build's result holds for
// exactly this digest.
func (c Config) BuildDigest(vars []AtBuild) string {
	vars = slices.Clone(vars)
	slices.SortFunc(vars, func(a, b AtBuild) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	// Each part is length-prefixed, so no two inputs run together.
	parts := append([]string{"kndl-env-1", c.Image, c.Bootstrap, c.Start}, flatten(vars)...)
	// Last and only when set, so the digests of versions made before them
	// stay as they were; a count before each list keeps the two apart.
	if len(c.DependencyFolders)+len(c.NextTo) > 0 {
		parts = append(parts, "dependency folders:", strconv.Itoa(len(c.DependencyFolders)))
		parts = append(parts, c.DependencyFolders...)
		for _, file := range slices.Sorted(maps.Keys(c.NextTo)) {
			parts = append(parts, file, c.NextTo[file])
		}
	}
	// Likewise only when on, after the dependency folders' part.
	if c.Docker {
		parts = append(parts, "docker:", "on")
	}
	// Likewise only when set, after Docker's part; counts keep the lists apart.
	if len(c.Features) > 0 {
		parts = append(parts, "features:", strconv.Itoa(len(c.Features)))
		for _, f := range c.Features {
			parts = append(parts, f.Ref, strconv.Itoa(len(f.Env)))
			parts = append(parts, f.Env...)
		}
	}
	// Likewise, after the Features' part.
	if len(c.ContainerEnv) > 0 {
		parts = append(parts, "container env:", strconv.Itoa(len(c.ContainerEnv)))
		parts = append(parts, c.ContainerEnv...)
	}
	if c.User != "" {
		parts = append(parts, "user:", c.User)
	}
	for _, part := range parts {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func flatten(vars []AtBuild) []string {
	var out []string
	for _, v := range vars {
		out = append(out, v.Name, v.Value)
	}
	return out
}

// Changes says what b changes from a, one line each, for the change log.
// Scripts are named, not shown: a person may have pasted a secret in one.
func Changes(a, b Config) []string {
	var out []string
	if a.Image != b.Image {
		out = append(out, fmt.Sprintf("image: %s -> %s", orDefault(a.Image), orDefault(b.Image)))
	}
	if a.Docker != b.Docker {
		out = append(out, fmt.Sprintf("docker: %s -> %s", onOff(a.Docker), onOff(b.Docker)))
	}
	// Named by reference; options, like scripts, are not shown.
	switch fa, fb := featureRefs(a.Features), featureRefs(b.Features); {
	case !slices.Equal(fa, fb):
		out = append(out, fmt.Sprintf("features: %s -> %s", list(fa), list(fb)))
	case !slices.EqualFunc(a.Features, b.Features, func(x, y protocol.Feature) bool { return slices.Equal(x.Env, y.Env) }):
		out = append(out, "features: options changed")
	}
	for _, s := range []struct{ name, a, b string }{{"Bootstrap", a.Bootstrap, b.Bootstrap}, {"Start", a.Start, b.Start}} {
		switch {
		case s.a == s.b:
		case s.a == "":
			out = append(out, fmt.Sprintf("%s script added (%d lines)", s.name, lines(s.b)))
		case s.b == "":
			out = append(out, s.name+" script removed")
		default:
			out = append(out, fmt.Sprintf("%s script changed (%d -> %d lines)", s.name, lines(s.a), lines(s.b)))
		}
	}
	for _, l := range []struct {
		name string
		a, b []string
	}{{"dependency folders", a.DependencyFolders, b.DependencyFolders}, {"next to", api.NextToList(a.NextTo), api.NextToList(b.NextTo)}} {
		if !slices.Equal(l.a, l.b) {
			out = append(out, fmt.Sprintf("%s: %s -> %s", l.name, list(l.a), list(l.b)))
		}
	}
	if a.CPUs != b.CPUs {
		out = append(out, fmt.Sprintf("cpus: %s -> %s", resource(a.CPUs), resource(b.CPUs)))
	}
	if a.MemoryMiB != b.MemoryMiB {
		out = append(out, fmt.Sprintf("memory: %s -> %s", resource(float64(a.MemoryMiB)), resource(float64(b.MemoryMiB))))
	}
	// Named, not shown, as the scripts are.
	switch {
	case a.CheckCommand == b.CheckCommand:
	case a.CheckCommand == "":
		out = append(out, "check added")
	case b.CheckCommand == "":
		out = append(out, "check removed")
	default:
		out = append(out, "check changed")
	}
	if ea, eb := api.EgressLine(a.Egress), api.EgressLine(b.Egress); ea != eb {
		out = append(out, fmt.Sprintf("egress: %s -> %s", ea, eb))
	}
	if pa, pb := api.PortsLine(a.Ports), api.PortsLine(b.Ports); pa != pb {
		out = append(out, fmt.Sprintf("ports: %s -> %s", pa, pb))
	}
	// Named, not shown: a value may be one a person pasted.
	switch na, nb := api.EnvNames(a.ContainerEnv), api.EnvNames(b.ContainerEnv); {
	case !slices.Equal(na, nb):
		out = append(out, fmt.Sprintf("container env: %s -> %s", list(na), list(nb)))
	case !slices.Equal(a.ContainerEnv, b.ContainerEnv):
		out = append(out, "container env: values changed")
	}
	if a.User != b.User {
		out = append(out, fmt.Sprintf("user: %s -> %s", or(a.User, "root"), or(b.User, "root")))
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func featureRefs(fs []protocol.Feature) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Ref)
	}
	return out
}

func orDefault(image string) string {
	if image == "" {
		return "the Runner's default"
	}
	return image
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func list(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func resource(v float64) string {
	if v == 0 {
		return "the Runner's default"
	}
	return fmt.Sprintf("%g", v)
}

func lines(s string) int { return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1 }
