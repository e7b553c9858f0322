package devcontainer

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// env maps containerEnv, then remoteEnv over it, to Variables. A value
// may name ${containerEnv:NAME[:default]}, resolved from containerEnv, and
// ${containerWorkspaceFolder}; a ${localEnv:…} or ${localWorkspaceFolder}
// is refused, as the Hub's or a person's machine is no Sandbox's to read.
func (r *reader) env(d *Draft) error {
	vars := map[string]string{}
	for _, p := range []string{"containerEnv", "remoteEnv"} {
		var m map[string]*string // remoteEnv's null unsets
		if _, err := r.get(p, &m); err != nil {
			return err
		}
		from := maps.Clone(vars)
		if p == "containerEnv" {
			from = nil // set at creation: nothing of the container's yet
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			prop := p + "." + name
			if !nameRE.MatchString(name) {
				return invalid(prop, "a Variable's name has letters, digits and _, not starting with a digit")
			}
			if m[name] == nil {
				delete(vars, name)
				continue
			}
			v, err := substitute(prop, *m[name], from)
			if err != nil {
				return err
			}
			vars[name] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		d.Variables = append(d.Variables, Variable{name, vars[name]})
	}
	return nil
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// varRE is one of the specification's ${…} variables; ${NAME} alone
	// is the shell's, left as it is.
	varRE = regexp.MustCompile(`\$\{(localEnv|containerEnv|localWorkspaceFolder|localWorkspaceFolderBasename|containerWorkspaceFolder|containerWorkspaceFolderBasename|devcontainerId)(?::([^}:]*)(?::([^}]*))?)?\}`)
)

// substitute resolves the specification's variables in a value of prop.
func substitute(prop, value string, container map[string]string) (string, error) {
	var err error
	out := varRE.ReplaceAllStringFunc(value, func(m string) string {
		g := varRE.FindStringSubmatch(m)
		switch g[1] {
		case "containerWorkspaceFolder":
			return "/workspace"
		case "containerWorkspaceFolderBasename":
			return "workspace"
		case "containerEnv":
			if v, ok := container[g[2]]; ok {
				return v
			}
			if strings.Count(m, ":") == 2 {
				return g[3] // the default
			}
			if err == nil {
				err = invalid(prop, "%s names a variable containerEnv does not set; kndl resolves it from containerEnv alone: set it there, or write its value", m)
			}
		case "devcontainerId":
			if err == nil {
				err = invalid(prop, "%s has no value in kndl: write the value", m)
			}
		default:
			if err == nil {
				err = invalid(prop, "%s is refused: it reads the machine of whoever opens the container, and a Sandbox's values are the Repo's alone; set a Variable with kndl var set instead", m)
			}
		}
		return m
	})
	return out, err
}
