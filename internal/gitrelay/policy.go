package gitrelay

import (
	"fmt"
	"path"
	"strings"
)

// The push policy: a Session pushes only to its own branches, those under
// its prefix (kndl/<short id>/ by default). The relay reads no objects, so
// it can't tell a fast-forward from a force-push; it tells a branch the
// Session created through the relay from one it found, and takes any
// update of the first and none of the second:
//
//	ref                                 create  update  delete
//	refs/heads/<prefix>…, made here     -       yes     no
//	refs/heads/<prefix>…, not made here yes     no      no
//	any other branch (the default too)  no      no      no
//	a tag or any other ref              no      no      no
//
// A delete is refused everywhere: a Session's branch may back a pull
// request a person is reviewing, and deleting is theirs to do on GitHub.

// verdict is judge's answer for one update: "" to take it, or why not,
// short enough for git's "! [remote rejected] … (why)" line.
type verdict string

// judge decides one update of a Session that pushes under prefix and has
// made the branches made says.
func judge(u Update, prefix string, made func(branch string) bool) verdict {
	b := u.Branch()
	switch {
	case b == "":
		return verdict("kndl pushes branches only, under " + prefix)
	case !strings.HasPrefix(b, prefix):
		return verdict("not this Session's branch; push to " + prefix + "…")
	case u.Delete():
		return "kndl does not delete branches; delete it on GitHub"
	case u.Create(), made(b):
		return ""
	default:
		return "not made by this Session: kndl does not update it"
	}
}

// hint is the line git shows as "remote: …" for a refused push: the
// branch the Session may push to instead, so the model takes it.
func hint(refused []Update, prefix string) string {
	name := "work"
	for _, u := range refused {
		if b := u.Branch(); b != "" && !strings.HasPrefix(b, prefix) {
			name = path.Base(b)
			break
		}
	}
	return fmt.Sprintf("kndl: this Session pushes only to new branches under %s, and updates only those it made. "+
		"Push to one of its own instead: git push -u origin HEAD:%s%s", prefix, prefix, name)
}
