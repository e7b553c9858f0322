package devcontainer

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/tailscale/hujson"

	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
)

// Fetch gets a Feature's OCI artifact: its manifest's digest and its one
// layer, a tar. ociimage.Artifact with the Runner's registry settings is
// one. Its errors keep their class (ErrNotFound, ErrUnavailable,
// ErrForbidden for an address the Runner's outbound rules refuse).
type Fetch func(ctx context.Context, ref string) (digest string, layer []byte, err error)

// maxMetadata bounds a Feature's devcontainer-feature.json.
const maxMetadata = 256 << 10

// Feature is one Feature to install, pinned to the artifact read.
type Feature struct {
	// Ref is the artifact by digest: repository@sha256:….
	Ref string
	// ID is the Feature's id, from its devcontainer-feature.json.
	ID string
	// Env holds its options as install.sh takes them, NAME=value, sorted.
	Env []string
	// ContainerEnv is its devcontainer-feature.json's containerEnv, values
	// as written: the Build sets them; read here for ${containerEnv:…}.
	ContainerEnv map[string]string
}

// Metadata is what a Feature's devcontainer-feature.json says of it.
type Metadata struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Options map[string]struct {
		Default any `json:"default"`
	} `json:"options"`
	DependsOn     map[string]json.RawMessage `json:"dependsOn"`
	InstallsAfter []string                   `json:"installsAfter"`
	// ContainerEnv the Build sets from the Feature's install.sh on; read
	// here to refuse a draft whose Build would fail on it, and for
	// ${containerEnv:…}.
	ContainerEnv map[string]json.RawMessage `json:"containerEnv"`
}

// ReadMetadata reads devcontainer-feature.json from a Feature's layer.
func ReadMetadata(layer []byte) (Metadata, error) {
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Metadata{}, fmt.Errorf("its artifact has no devcontainer-feature.json: %w", errdefs.ErrInvalid)
		}
		if err != nil {
			return Metadata{}, fmt.Errorf("its artifact is not a tar (%v): %w", err, errdefs.ErrInvalid)
		}
		if path.Clean("/"+hdr.Name) != "/devcontainer-feature.json" || hdr.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxMetadata+1))
		if err != nil || len(b) > maxMetadata {
			return Metadata{}, fmt.Errorf("its devcontainer-feature.json is unreadable or over %d bytes: %w", maxMetadata, errdefs.ErrInvalid)
		}
		var m Metadata
		if std, err := hujson.Standardize(b); err != nil || json.Unmarshal(std, &m) != nil || m.ID == "" {
			return Metadata{}, fmt.Errorf("its devcontainer-feature.json is not a Feature's (with an id): %w", errdefs.ErrInvalid)
		}
		return m, nil
	}
}

// node is a Feature found, before its place in the order is known.
type node struct {
	resource string // the ref without tag or digest: what installsAfter names
	feature  Feature
	meta     Metadata
	hard     []string // resources it dependsOn
}

// features reads the features property and every Feature's dependsOn,
// and returns them in the specification's install order.
func (r *reader) features(ctx context.Context, fetch Fetch) ([]Feature, error) {
	var given map[string]json.RawMessage
	if ok, err := r.get("features", &given); !ok || err != nil {
		return nil, err
	}
	var order []string
	if _, err := r.get("overrideFeatureInstallOrder", &order); err != nil {
		return nil, err
	}
	nodes := map[string]*node{}
	type want struct {
		prop, ref string
		opts      json.RawMessage
	}
	var queue []want
	for _, ref := range slices.Sorted(maps.Keys(given)) {
		queue = append(queue, want{fmt.Sprintf("features[%q]", ref), ref, given[ref]})
	}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		resource, err := featureResource(w.prop, w.ref)
		if err != nil {
			return nil, err
		}
		if nodes[resource] != nil {
			continue // the file's own options, or the first dependsOn's, stand
		}
		if len(nodes) == environment.MaxFeatures {
			return nil, invalid(w.prop, "over %d Features with their dependencies", environment.MaxFeatures)
		}
		if fetch == nil {
			return nil, fmt.Errorf("devcontainer.json %s: no Runner to fetch Features through: %w", w.prop, errdefs.ErrUnavailable)
		}
		digest, layer, err := fetch(ctx, w.ref)
		if err != nil {
			return nil, fmt.Errorf("devcontainer.json %s: %w", w.prop, err)
		}
		meta, err := ReadMetadata(layer)
		if err != nil {
			return nil, fmt.Errorf("devcontainer.json %s: %w", w.prop, err)
		}
		env, err := optionEnv(w.prop, w.opts, meta)
		if err != nil {
			return nil, err
		}
		n := &node{resource: resource, meta: meta, feature: Feature{Ref: resource + "@" + digest, ID: meta.ID, Env: env}}
		for _, name := range slices.Sorted(maps.Keys(meta.ContainerEnv)) {
			var v string
			if !nameRE().MatchString(name) || json.Unmarshal(meta.ContainerEnv[name], &v) != nil {
				return nil, invalid(fmt.Sprintf("%s containerEnv[%q]", w.prop, name), "its devcontainer-feature.json sets no variable (a name of letters, digits and _, a string value); the Build would fail on it: ask its author, or name another Feature")
			}
			if n.feature.ContainerEnv == nil {
				n.feature.ContainerEnv = map[string]string{}
			}
			n.feature.ContainerEnv[name] = v
		}
		nodes[resource] = n
		for _, dep := range slices.Sorted(maps.Keys(meta.DependsOn)) {
			prop := fmt.Sprintf("%s dependsOn[%q]", w.prop, dep)
			res, err := featureResource(prop, dep)
			if err != nil {
				return nil, err
			}
			n.hard = append(n.hard, res)
			queue = append(queue, want{prop, dep, meta.DependsOn[dep]})
		}
	}
	return installOrder(nodes, order)
}

// installOrder sorts Features in rounds, as the specification does: each
// round takes every Feature whose dependsOn and present installsAfter are
// installed, overrideFeatureInstallOrder's first, then by reference.
func installOrder(nodes map[string]*node, override []string) ([]Feature, error) {
	rank := func(res string) int {
		if i := slices.Index(override, res); i >= 0 {
			return i
		}
		for i, o := range override { // overrides may name a version
			if r, err := featureResource("", o); err == nil && r == res {
				return i
			}
		}
		return len(override)
	}
	done := map[string]bool{}
	var out []Feature
	for len(done) < len(nodes) {
		var round []string
		for res, n := range nodes {
			if done[res] {
				continue
			}
			ready := true
			for _, dep := range n.hard {
				ready = ready && done[dep]
			}
			for _, after := range n.meta.InstallsAfter {
				if r, err := featureResource("", after); err == nil && nodes[r] != nil && r != res {
					ready = ready && done[r]
				}
			}
			if ready {
				round = append(round, res)
			}
		}
		if len(round) == 0 {
			var left []string
			for res := range nodes {
				if !done[res] {
					left = append(left, res)
				}
			}
			slices.Sort(left)
			return nil, invalid("features", "%s depend on each other in a cycle (dependsOn, installsAfter): no order installs them", strings.Join(left, ", "))
		}
		slices.SortFunc(round, func(a, b string) int {
			if ra, rb := rank(a), rank(b); ra != rb {
				return ra - rb
			}
			return strings.Compare(a, b)
		})
		for _, res := range round {
			done[res] = true
			out = append(out, nodes[res].feature)
		}
	}
	return out, nil
}

// featureResource checks a Feature's reference and returns it without
// its tag or digest. Only OCI references with a registry are taken.
func featureResource(prop, ref string) (string, error) {
	switch {
	case strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../"):
		return "", invalid(prop, "a Feature in the Repo's files is not supported yet; publish it to an OCI registry and name it there")
	case strings.HasPrefix(ref, "https://") || strings.HasPrefix(ref, "http://"):
		return "", invalid(prop, "a Feature from a tarball URL is not supported; publish it to an OCI registry and name it there")
	case !strings.Contains(ref, "/") || !hostRE().MatchString(ref[:strings.Index(ref, "/")]):
		return "", invalid(prop, "%q is not a Feature's OCI reference with its registry, such as ghcr.io/devcontainers/features/go:1", ref)
	}
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", invalid(prop, "%q is not a Feature's OCI reference (%v), such as ghcr.io/devcontainers/features/go:1", ref, err)
	}
	return r.Context().Name(), nil
}

// hostRE is a registry host: a name with a dot or a port, or localhost.
var hostRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(localhost(:[0-9]+)?|[A-Za-z0-9.-]+\.[A-Za-z0-9.-]+(:[0-9]+)?|[A-Za-z0-9.-]+:[0-9]+)$`)
})

// optionEnv makes a Feature's options install.sh's environment: those the
// file gives over the Feature's defaults, each name as the specification
// makes it (non-word characters and leading digits to _, upper case). A
// string alone is the version option.
func optionEnv(prop string, raw json.RawMessage, meta Metadata) ([]string, error) {
	given := map[string]any{}
	var version string
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case json.Unmarshal(raw, &version) == nil:
		given["version"] = version
	case json.Unmarshal(raw, &given) == nil:
	default:
		return nil, invalid(prop, "its options are %s, not an object of options or a version string", raw)
	}
	vals := map[string]string{}
	for k, o := range meta.Options {
		if o.Default != nil {
			vals[k] = fmt.Sprint(o.Default)
		}
	}
	for k, v := range given {
		switch v.(type) {
		case string, bool, float64:
			vals[k] = fmt.Sprint(v)
		default:
			return nil, invalid(fmt.Sprintf("%s.%s", prop, k), "an option is a string or a boolean")
		}
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		env = append(env, optionName(k)+"="+vals[k])
	}
	return env, nil
}

var (
	nonWordRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^\w_]`) })
	leadRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[\d_]+`) })
)

func optionName(k string) string {
	return strings.ToUpper(leadRE().ReplaceAllString(nonWordRE().ReplaceAllString(k, "_"), "_"))
}
