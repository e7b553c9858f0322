package runner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// inotifyLimit is the host's count of inotify instances a user may hold.
const inotifyLimit = "/proc/sys/fs/inotify/max_user_instances"

// inotifyPerSession is what a Session takes: Claude Code's instance and its
// transcript follower's, and one to spare (a prompt filling, watchOpens).
const inotifyPerSession = 3

// roomForInotify raises the inotify instance limit in file, when it is
// lower, to what sessions Sessions take beside the host's own 128, and
// says so. The kernel counts every Sandbox's instances against the user
// that made its user namespace, root, so Linux's default of 128 holds about
// 40 Sessions; past it a follower polls and Claude Code can't watch files.
func roomForInotify(file string, sessions int) (note string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	have, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", fmt.Errorf("read %s: %q is not a count", file, b)
	}
	want := 128 + inotifyPerSession*sessions
	if have >= want {
		return "", nil
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return "", fmt.Errorf("raise %s from %d to %d for %d Sessions: %w", file, have, want, sessions, err)
	}
	return fmt.Sprintf("Raised fs.inotify.max_user_instances from %d to %d: every Sandbox's inotify instances count as root's, %d a Session.", have, want, inotifyPerSession), nil
}
