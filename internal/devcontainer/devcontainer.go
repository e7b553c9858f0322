// Package devcontainer reads a Repo's devcontainer.json (the Dev Container
// specification, containers.dev) into an Environment draft: the image, the
// Features in their install order, the lifecycle commands as the Bootstrap
// and Start scripts, Variables, ports, the user and resources, with a note
// for each property kndl leaves to the host or does not know. It parses
// JSONC with tailscale's hujson, never by hand. The Hub imports it.
package devcontainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tailscale/hujson"

	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// MaxFile bounds a devcontainer.json.
const MaxFile = 1 << 20

// Draft is what a devcontainer.json makes: an Environment's Config (its
// Ports are forwardPorts, labelled by portsAttributes) and what goes
// beside it.
type Draft struct {
	Config environment.Config
	// Features are installed in the Build in this order, before the
	// Bootstrap script: Config.Features, with their ids.
	Features []Feature
	// Variables come from containerEnv, then remoteEnv over it; none is
	// Sensitive.
	Variables []Variable
	// Notes say, one line each, what was left out and why.
	Notes []string
}

// Variable is one of containerEnv's or remoteEnv's, its value resolved.
type Variable struct{ Name, Value string }

// invalid is an error naming the property at fault; err's class is
// ErrInvalid.
func invalid(property, format string, args ...any) error {
	return fmt.Errorf("devcontainer.json %s: %s: %w", property, fmt.Sprintf(format, args...), errdefs.ErrInvalid)
}

// Parse reads b, JSON with comments and trailing commas as VS Code writes
// it, into its top-level properties.
func Parse(b []byte) (map[string]json.RawMessage, error) {
	if len(b) > MaxFile {
		return nil, fmt.Errorf("devcontainer.json is %d bytes; at most %d (1 MiB): %w", len(b), MaxFile, errdefs.ErrTooLarge)
	}
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("devcontainer.json is not JSON with comments: %v: %w", err, errdefs.ErrInvalid)
	}
	var props map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(std))
	if err := dec.Decode(&props); err != nil || props == nil {
		return nil, fmt.Errorf("devcontainer.json is not an object of properties: %w", errdefs.ErrInvalid)
	}
	return props, nil
}

// Read makes a Draft from a devcontainer.json, fetching each
// Feature's metadata, and the image's environment if ${containerEnv:…}
// needs it. Any error names the property at fault; a Draft is made whole
// or not at all.
func Read(ctx context.Context, b []byte, src Sources) (Draft, error) {
	props, err := Parse(b)
	if err != nil {
		return Draft{}, err
	}
	r := reader{props: props}
	for _, refused := range []struct{ prop, why string }{
		{"build", "a Dockerfile is refused until kndl has a builder; name the image your CI builds from it in image instead"},
		{"dockerFile", "a Dockerfile is refused until kndl has a builder; name the image your CI builds from it in image instead"},
		{"dockerComposeFile", "Docker Compose is refused: a Session is one Sandbox; name the service's image in image instead, and turn Docker on for the rest"},
	} {
		if _, ok := props[refused.prop]; ok {
			return Draft{}, invalid(refused.prop, "%s", refused.why)
		}
	}
	steps := []func(*Draft) error{r.image, r.lifecycle, r.ports, r.user, r.resources}
	var d Draft
	for _, step := range steps {
		if err := step(&d); err != nil {
			return Draft{}, err
		}
	}
	if d.Features, err = r.features(ctx, src.Feature); err != nil {
		return Draft{}, err
	}
	if err := r.env(ctx, &d, src); err != nil {
		return Draft{}, err
	}
	for _, f := range d.Features {
		d.Config.Features = append(d.Config.Features, protocol.Feature{Ref: f.Ref, Env: f.Env})
	}
	if err := d.Config.Check(); err != nil {
		return Draft{}, fmt.Errorf("devcontainer.json makes an Environment kndl refuses: %w", err)
	}
	d.Notes = append(d.Notes, r.leftOut()...)
	return d, nil
}

// reader takes properties from a parsed file, marking each it used.
type reader struct {
	props map[string]json.RawMessage
	used  map[string]bool
}

// get decodes property p into v; ok is false when the file has no p.
func (r *reader) get(p string, v any) (bool, error) {
	raw, ok := r.props[p]
	if !ok {
		return false, nil
	}
	if r.used == nil {
		r.used = map[string]bool{}
	}
	r.used[p] = true
	if err := json.Unmarshal(raw, v); err != nil {
		return true, invalid(p, "%s is not what the specification allows here: %v", bytes.TrimSpace(raw), err)
	}
	return true, nil
}

// hostOnly are the properties a Sandbox never takes: the host decides.
var hostOnly = []string{"runArgs", "mounts", "privileged", "capAdd", "securityOpt", "init"}

// leftOut notes every property not used: the host's first, then the ones
// kndl does not know or use, sorted.
func (r *reader) leftOut() []string {
	var notes []string
	for _, p := range hostOnly {
		if _, ok := r.props[p]; ok {
			notes = append(notes, p+": ignored; a Sandbox never takes it, its host decides")
		}
	}
	for _, p := range slices.Sorted(maps.Keys(r.props)) {
		if !r.used[p] && !slices.Contains(hostOnly, p) && p != "name" && p != "$schema" {
			notes = append(notes, p+": not used by kndl")
		}
	}
	return notes
}

func (r *reader) image(d *Draft) error {
	_, err := r.get("image", &d.Config.Image)
	return err
}

func (r *reader) user(d *Draft) error {
	for _, p := range []string{"remoteUser", "containerUser"} {
		var u string
		if _, err := r.get(p, &u); err != nil {
			return err
		}
		if u != "" && !environment.UserName().MatchString(u) {
			return invalid(p, "%q is not a user name", u)
		}
		if d.Config.User == "" {
			d.Config.User = u
		}
	}
	if d.Config.User == "root" || d.Config.User == "0" {
		d.Config.User = "" // the Sandbox's own
	}
	return nil
}

// resources maps hostRequirements: cpus and memory within the
// Environment's limits, the Runner capping them further.
func (r *reader) resources(d *Draft) error {
	var hr struct {
		CPUs    float64         `json:"cpus"`
		Memory  string          `json:"memory"`
		Storage string          `json:"storage"`
		GPU     json.RawMessage `json:"gpu"`
	}
	if ok, err := r.get("hostRequirements", &hr); !ok || err != nil {
		return err
	}
	switch {
	case hr.CPUs < 0:
		return invalid("hostRequirements.cpus", "%g is below zero", hr.CPUs)
	case hr.CPUs > environment.MaxCPUs:
		d.Notes = append(d.Notes, fmt.Sprintf("hostRequirements.cpus: %g is over kndl's %d; asks for %d", hr.CPUs, environment.MaxCPUs, environment.MaxCPUs))
		hr.CPUs = environment.MaxCPUs
	}
	d.Config.CPUs = hr.CPUs
	if hr.Memory != "" {
		mib, err := mebibytes(hr.Memory)
		if err != nil {
			return invalid("hostRequirements.memory", "%v", err)
		}
		if mib > environment.MaxMemoryMiB {
			d.Notes = append(d.Notes, fmt.Sprintf("hostRequirements.memory: %s is over kndl's %d MiB; asks for that", hr.Memory, environment.MaxMemoryMiB))
			mib = environment.MaxMemoryMiB
		}
		d.Config.MemoryMiB = mib
	}
	if hr.Storage != "" {
		d.Notes = append(d.Notes, "hostRequirements.storage: not used; a Sandbox's disk is the Runner's to size")
	}
	if len(hr.GPU) > 0 {
		d.Notes = append(d.Notes, "hostRequirements.gpu: not used; Sandboxes have no GPU")
	}
	return nil
}

var sizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(tb|gb|mb|kb)?$`) })

// mebibytes reads the specification's sizes, such as 4gb or 512mb, as
// MiB, rounding up.
func mebibytes(s string) (int, error) {
	m := sizeRE().FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 4gb or 512mb", s)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	per := map[string]float64{"tb": 1 << 40, "gb": 1 << 30, "mb": 1 << 20, "kb": 1 << 10, "": 1}[m[2]]
	mib := n * per / (1 << 20)
	if mib > environment.MaxMemoryMiB*2 {
		return environment.MaxMemoryMiB * 2, nil // capped by the caller; no overflow
	}
	out := int(mib)
	if float64(out) < mib {
		out++
	}
	return out, nil
}

// ports maps forwardPorts, each a number or "localhost:N", to the ports
// each Session's view offers, labelled from portsAttributes' exact port
// entries. A label is a person's words shown to others: one with a
// control character is refused, a long one cut with a note.
func (r *reader) ports(d *Draft) error {
	var fwd []json.RawMessage
	if _, err := r.get("forwardPorts", &fwd); err != nil {
		return err
	}
	var attrs map[string]struct {
		Label string `json:"label"`
	}
	if _, err := r.get("portsAttributes", &attrs); err != nil {
		return err
	}
	for i, raw := range fwd {
		n, err := forwardPort(raw)
		switch {
		case errors.Is(err, errOtherHost):
			d.Notes = append(d.Notes, fmt.Sprintf("forwardPorts[%d]: %s is another host's port; a Session offers its own alone", i, raw))
			continue
		case err != nil:
			return invalid(fmt.Sprintf("forwardPorts[%d]", i), "%v", err)
		case slices.ContainsFunc(d.Config.Ports, func(p protocol.OfferedPort) bool { return p.Port == n }):
			continue
		case len(d.Config.Ports) == environment.MaxPorts:
			return invalid("forwardPorts", "has over %d ports; kndl offers at most %d", environment.MaxPorts, environment.MaxPorts)
		}
		key := strconv.Itoa(n)
		label := attrs[key].Label
		if utf8.RuneCountInString(label) > environment.MaxPortLabel {
			label = string([]rune(label)[:environment.MaxPortLabel])
			d.Notes = append(d.Notes, fmt.Sprintf("portsAttributes[%q].label: cut to its first %d characters", key, environment.MaxPortLabel))
		}
		if err := environment.CheckPortLabel(label); err != nil {
			return invalid(fmt.Sprintf("portsAttributes[%q].label", key), "%v; a label is one line of text", err)
		}
		d.Config.Ports = append(d.Config.Ports, protocol.OfferedPort{Port: n, Label: label})
	}
	var unused []string
	for _, key := range slices.Sorted(maps.Keys(attrs)) {
		if !slices.ContainsFunc(d.Config.Ports, func(p protocol.OfferedPort) bool { return strconv.Itoa(p.Port) == key }) {
			unused = append(unused, strconv.Quote(key))
		}
	}
	if len(unused) > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("portsAttributes[%s]: not used; kndl labels the ports forwardPorts names, each by its number", strings.Join(unused, ", ")))
	}
	return nil
}

// errOtherHost is a forwardPorts entry of another host than the Sandbox.
var errOtherHost = errors.New("another host's port")

// forwardPort reads one forwardPorts entry: a port, or host:port of the
// Sandbox's own loopback.
func forwardPort(raw json.RawMessage) (int, error) {
	var n int
	var s string
	switch {
	case json.Unmarshal(raw, &n) == nil:
	case json.Unmarshal(raw, &s) == nil:
		host, port, ok := strings.Cut(s, ":")
		if !ok {
			return 0, fmt.Errorf("%q is not host:port", s)
		}
		if host != "localhost" && host != "127.0.0.1" {
			return 0, errOtherHost
		}
		var err error
		if n, err = strconv.Atoi(port); err != nil {
			return 0, fmt.Errorf("%q is not host:port", s)
		}
	default:
		return 0, fmt.Errorf("%s is not a port number or host:port", raw)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%d is not a port (1 to 65535)", n)
	}
	return n, nil
}
