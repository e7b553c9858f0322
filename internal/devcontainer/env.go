package devcontainer

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"

	"kndl.dev/kndl/internal/environment"
)

// ImageEnv reads an image's environment (its config's Env, NAME=value)
// through the registry settings a Fetch uses; ociimage.Env is one.
type ImageEnv func(ctx context.Context, ref string) ([]string, error)

// Sources are what Read reads beyond the file.
type Sources struct {
	// Feature fetches each Feature's artifact.
	Feature Fetch
	// ImageEnv reads the image's environment, for a ${containerEnv:…}
	// that neither the Features nor containerEnv set.
	ImageEnv ImageEnv
	// Unset says why no Variable named name is set from the file, "" if
	// one may be: such a name is left out with a note, its value not
	// read.
	Unset func(name string) string
}

// env maps containerEnv, then remoteEnv over it, to Variables, and
// containerEnv alone to the Config's ContainerEnv, which the Build sets. A value
// may name ${containerEnv:NAME[:default]}, read from the container as its
// image and Features make it, and in remoteEnv from containerEnv over
// that; and ${containerWorkspaceFolder}. A ${localEnv:…} or
// ${localWorkspaceFolder} is refused, as the Hub's or a person's machine
// is no Sandbox's to read. A name or value no Variable may have is
// refused, naming it; a name src.Unset names is left out with a note.
func (r *reader) env(ctx context.Context, d *Draft, src Sources) error {
	made := madeEnv(ctx, d, src.ImageEnv)
	vars := map[string]string{}
	for _, p := range []string{"containerEnv", "remoteEnv"} {
		var m map[string]*string // remoteEnv's null unsets
		if _, err := r.get(p, &m); err != nil {
			return err
		}
		file := maps.Clone(vars)
		if p == "containerEnv" {
			file = nil // set at creation: the container's own alone
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			prop := fmt.Sprintf("%s[%q]", p, name)
			if !environment.VariableName().MatchString(name) {
				return invalid(prop, "a Variable's name has letters, digits and _, not starting with a digit, and at most %d of them", environment.MaxVariableName)
			}
			if m[name] == nil {
				delete(vars, name)
				continue
			}
			if why := unset(src, name); why != "" {
				d.Notes = append(d.Notes, fmt.Sprintf("%s: not set; %s", prop, why))
				continue
			}
			v, err := substitute(prop, *m[name], func(ref string) (string, bool, error) {
				if v, ok := file[ref]; ok {
					return v, true, nil
				}
				return made(prop, ref)
			})
			if err != nil {
				return err
			}
			if err := checkValue(prop, v); err != nil {
				return err
			}
			vars[name] = v
		}
		if p == "containerEnv" {
			// Set for the container's whole life: in the Build too.
			for _, name := range slices.Sorted(maps.Keys(vars)) {
				d.Config.ContainerEnv = append(d.Config.ContainerEnv, name+"="+vars[name])
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		d.Variables = append(d.Variables, Variable{name, vars[name]})
	}
	return nil
}

func unset(src Sources, name string) string {
	if src.Unset == nil {
		return ""
	}
	return src.Unset(name)
}

// checkValue refuses a value no Variable holds: over the size limit, or
// with a control character other than tab and newline (a terminal's
// escapes, a NUL no environment can carry).
func checkValue(prop, v string) error {
	if len(v) > environment.MaxVariableBytes {
		return invalid(prop, "the value is %d bytes; a Variable's is at most %d", len(v), environment.MaxVariableBytes)
	}
	if i := strings.IndexFunc(v, func(c rune) bool { return unicode.IsControl(c) && c != '\t' && c != '\n' }); i >= 0 {
		return invalid(prop, "the value holds the control character %U at byte %d; a Variable's value is text, tabs and newlines its only control characters", []rune(v[i:])[0], i)
	}
	return nil
}

// madeEnv returns a lookup of the environment the container has before
// containerEnv: the image's, with its Features' containerEnv over it in
// install order. The image's is read once, when a name needs it.
func madeEnv(ctx context.Context, d *Draft, imageEnv ImageEnv) func(prop, name string) (string, bool, error) {
	var image map[string]string
	return func(prop, name string) (string, bool, error) {
		for _, f := range slices.Backward(d.Features) {
			v, ok := f.ContainerEnv[name]
			switch {
			case ok && strings.Contains(v, "$"):
				return "", false, invalid(prop, "${containerEnv:%s} is the Feature %s's containerEnv %q, which reads other variables; kndl reads a Feature's plain values alone: write the value", name, f.ID, v)
			case ok:
				return v, true, nil
			}
		}
		if image == nil && imageEnv != nil && d.Config.Image != "" {
			env, err := imageEnv(ctx, d.Config.Image)
			if err != nil {
				return "", false, fmt.Errorf("devcontainer.json %s: ${containerEnv:%s} is read from the image %s, whose config could not be read: %w", prop, name, d.Config.Image, err)
			}
			image = map[string]string{}
			for _, kv := range env {
				if k, v, ok := strings.Cut(kv, "="); ok {
					image[k] = v
				}
			}
		}
		v, ok := image[name]
		return v, ok, nil
	}
}

var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	// varRE is one of the specification's ${…} variables; ${NAME} alone
	// is the shell's, left as it is.
	varRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\$\{(localEnv|containerEnv|localWorkspaceFolder|localWorkspaceFolderBasename|containerWorkspaceFolder|containerWorkspaceFolderBasename|devcontainerId)(?::([^}:]*)(?::([^}]*))?)?\}`)
	})
)

// substitute resolves the specification's variables in a value of prop,
// ${containerEnv:…} with container.
func substitute(prop, value string, container func(name string) (string, bool, error)) (string, error) {
	var err error
	fail := func(e error) {
		if err == nil {
			err = e
		}
	}
	out := varRE().ReplaceAllStringFunc(value, func(m string) string {
		g := varRE().FindStringSubmatch(m)
		switch g[1] {
		case "containerWorkspaceFolder":
			return "/workspace"
		case "containerWorkspaceFolderBasename":
			return "workspace"
		case "containerEnv":
			v, ok, lerr := container(g[2])
			switch {
			case lerr != nil:
				fail(lerr)
			case ok:
				return v
			case strings.Count(m, ":") == 2:
				return g[3] // the default
			default:
				fail(invalid(prop, "%s names a variable that neither the image, its Features' containerEnv nor containerEnv sets: write its value, or give a default, ${containerEnv:%s:VALUE}", m, g[2]))
			}
		case "devcontainerId":
			fail(invalid(prop, "%s has no value in kndl: write the value", m))
		default:
			fail(invalid(prop, "%s is refused: it reads the machine of whoever opens the container, and a Sandbox's values are the Repo's alone; set a Variable with kndl var set instead", m))
		}
		return m
	})
	return out, err
}
