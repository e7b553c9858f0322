package build

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/tailscale/hujson"
)

// Feature is a Dev Container Feature to install (containers.dev,
// Features): its artifact by digest and its options.
type Feature struct {
	Ref string
	// Env holds its options, NAME=value, as install.sh reads them.
	Env []string
}

// featureDir is where a Feature is unpacked in the Build's Sandbox while
// its install.sh runs; it is gone before the next.
const featureDir = "/tmp/kndl-feature"

// feature unpacks f's layer in the Sandbox, with the image's tar (never
// on the host: the layer is the registry's, not ours), and runs its
// install.sh as root there, as the specification does: in its folder,
// with its containerEnv set over the environment so far, the options and
// the user variables, and the Variables available at build. It returns
// the environment so far with the containerEnv, which every later step
// and each Session of the Build starts from.
func (s step) feature(ctx context.Context, spec Spec, f Feature) ([]string, error) {
	if spec.FetchFeature == nil {
		return nil, fmt.Errorf("this Runner cannot pull Features")
	}
	layer, err := spec.FetchFeature(ctx, f.Ref)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx, nil, "sh", "-c", "rm -rf "+featureDir+" && mkdir -p "+featureDir+" && tar -x -C "+featureDir, bytes.NewReader(layer)); err != nil {
		return nil, fmt.Errorf("unpack it (the image needs tar): %w", err)
	}
	defer s.quiet(context.WithoutCancel(ctx), "rm", "-rf", featureDir)
	meta, err := s.quiet(ctx, "cat", featureDir+"/devcontainer-feature.json")
	if err != nil {
		return nil, fmt.Errorf("read its devcontainer-feature.json: %w", err)
	}
	container, err := containerEnv([]byte(meta), s.env)
	if err != nil {
		return nil, err
	}
	env := append(append(append([]string(nil), container...), spec.Env...), f.Env...)
	user, home, err := s.featureUser(ctx, spec.User)
	if err != nil {
		return nil, err
	}
	env = append(env, "_REMOTE_USER="+user, "_CONTAINER_USER="+user, "_REMOTE_USER_HOME="+home, "_CONTAINER_USER_HOME="+home)
	s.dir = featureDir
	if err := s.run(ctx, env, "sh", "-c", "chmod +x ./install.sh && ./install.sh"); err != nil {
		return nil, fmt.Errorf("its install.sh failed: %w", err)
	}
	return container, nil
}

// featureUser is the user and home a Feature installs for: root, or the
// Environment's user, as the image has it so far, or /home/NAME for one a
// Feature is yet to make (common-utils makes _REMOTE_USER).
func (s step) featureUser(ctx context.Context, user string) (string, string, error) {
	if user == "" {
		return "root", "/root", nil
	}
	u, ok, err := s.lookupUser(ctx, user)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("read the image's users: %w", err)
	case ok:
		return u.Name, u.Home, nil
	}
	return user, "/home/" + user, nil
}

// containerEnv returns env with the containerEnv of a Feature's
// devcontainer-feature.json (meta) set over it, in the file's order, as
// the specification's reference implementation does with a Dockerfile ENV
// instruction for each before the Feature's install: $NAME, ${NAME},
// ${NAME:-word} and ${NAME:+word} in a value read from the environment so
// far, as Docker reads them.
func containerEnv(meta []byte, env []string) ([]string, error) {
	v, err := hujson.Parse(meta)
	if err != nil {
		return nil, fmt.Errorf("its devcontainer-feature.json is not JSON with comments: %v", err)
	}
	top, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil, fmt.Errorf("its devcontainer-feature.json is not an object")
	}
	out := slices.Clone(env)
	for _, m := range top.Members {
		if name, _ := literal(m.Name); name != "containerEnv" {
			continue
		}
		vars, ok := m.Value.Value.(*hujson.Object)
		if !ok {
			return nil, fmt.Errorf("its devcontainer-feature.json's containerEnv is not an object of names and values")
		}
		for _, kv := range vars.Members {
			name, _ := literal(kv.Name)
			value, ok := literal(kv.Value)
			switch {
			case !envNameRE().MatchString(name):
				return nil, fmt.Errorf("its devcontainer-feature.json's containerEnv names %q, not a variable (letters, digits and _, not starting with a digit)", name)
			case !ok || strings.ContainsRune(value, 0):
				return nil, fmt.Errorf("its devcontainer-feature.json's containerEnv.%s is not a string of text", name)
			}
			value = os.Expand(value, func(ref string) string {
				name, op, word := ref, "", ""
				if i := strings.Index(ref, ":"); i > 0 && i+1 < len(ref) && strings.ContainsRune("-+", rune(ref[i+1])) {
					name, op, word = ref[:i], ref[i+1:i+2], ref[i+2:]
				}
				got := lookup(withPath(out), name) // PATH is there, as in every step
				switch {
				case op == "-" && got == "", op == "+" && got != "":
					return word
				case op == "+":
					return ""
				}
				return got
			})
			out = append(slices.DeleteFunc(out, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }), name+"="+value)
		}
	}
	return out, nil
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// literal is v's string, ok false when v is not a JSON string.
func literal(v hujson.Value) (string, bool) {
	l, ok := v.Value.(hujson.Literal)
	if !ok || l.Kind() != '"' {
		return "", false
	}
	return l.String(), true
}

// lookup is name's value in env, "" when it has none.
func lookup(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
