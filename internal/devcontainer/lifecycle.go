package devcontainer

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/environment"
)

// lifecycle maps the create commands to the Bootstrap script and the
// start and attach commands to the Start script, each in the
// specification's order.
func (r *reader) lifecycle(d *Draft) error {
	for _, s := range []struct {
		name  string
		props []string
		into  *string
	}{
		{"Bootstrap", []string{"onCreateCommand", "updateContentCommand", "postCreateCommand"}, &d.Config.Bootstrap},
		{"Start", []string{"postStartCommand", "postAttachCommand"}, &d.Config.Start},
	} {
		var b strings.Builder
		for _, p := range s.props {
			var raw json.RawMessage
			if ok, err := r.get(p, &raw); !ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			script, err := command(p, raw)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "# %s, from devcontainer.json\n%s", p, script)
			if b.Len() > environment.MaxScript {
				return invalid(p, "the %s script it makes, with %s, is %d bytes; at most %d: put the commands in a script in the Repo and run that", s.name, strings.Join(s.props, ", "), b.Len(), environment.MaxScript)
			}
		}
		*s.into = b.String()
	}
	if d.Config.Bootstrap != "" {
		d.Notes = append(d.Notes, "onCreateCommand, updateContentCommand, postCreateCommand: run once per Build as root, without the Repo's files; a command that needs them belongs in postStartCommand")
	}
	return nil
}

// command is one lifecycle command as shell: a string runs in sh -c, an
// array runs as its words with no shell, and an object runs its commands
// (each a string or an array) in parallel, all of them to succeed.
func command(p string, raw json.RawMessage) (string, error) {
	var s string
	var argv []string
	var parallel map[string]json.RawMessage
	switch {
	case json.Unmarshal(raw, &s) == nil:
		return "sh -c " + quote(s) + "\n", nil
	case json.Unmarshal(raw, &argv) == nil:
		if len(argv) == 0 {
			return "", invalid(p, "an empty array is no command")
		}
		return words(argv) + "\n", nil
	case json.Unmarshal(raw, &parallel) == nil:
		var b strings.Builder
		b.WriteString("pids=()\n")
		for _, name := range slices.Sorted(maps.Keys(parallel)) {
			var one string
			switch {
			case json.Unmarshal(parallel[name], &s) == nil:
				one = "sh -c " + quote(s)
			case json.Unmarshal(parallel[name], &argv) == nil && len(argv) > 0:
				one = words(argv)
			default:
				return "", invalid(p+"."+name, "%s is not a string or an array of strings", parallel[name])
			}
			fmt.Fprintf(&b, "%s & pids+=($!) # %s\n", one, strings.ReplaceAll(name, "\n", " "))
		}
		b.WriteString(`for pid in "${pids[@]}"; do wait "$pid"; done` + "\n")
		return b.String(), nil
	}
	return "", invalid(p, "%s is not a string, an array of strings or an object of commands", raw)
}

func words(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

// quote makes s one shell word.
func quote(s string) string {
	if s != "" && safeRE().MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var safeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`) })
