// Package dockerd runs Docker's daemon inside a Sandbox whose Environment
// turns Docker on, its data on the Sandbox's Docker disk, and stops its
// containers before the Sandbox sleeps. dockerd is the Sandbox's own: its
// containers are nested in the Sandbox's namespaces, never on the host's
// Docker. Only internal/runner imports it.
package dockerd

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/sandbox"
)

const (
	// Disk is the name of the Sandbox's Docker disk, mounted at DataDir.
	Disk = "docker"
	// DataDir is dockerd's data root: images, containers, volumes.
	DataDir = "/var/lib/docker"
	// logPath is dockerd's log inside the Sandbox, shown when it fails.
	logPath = "/var/log/kndl-dockerd.log"
	// readyTimeout bounds dockerd's start to its first answer (measured:
	// about 0.4 s on a warm disk).
	readyTimeout = 60 * time.Second
	// stopTimeout is how long each container gets to shut down after
	// SIGTERM before docker stop kills it, as docker stop's own default.
	stopTimeout = 10
)

// path is the environment of the commands run here: dockerd and its
// tools, and nothing of the Session's.
var path = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// startScript starts dockerd detached from the exec (its parent becomes
// the Sandbox's init) and waits for it to answer. What dockerd and its
// containerd left under /var/run at the last boot is cleared first, as a
// machine's reboot clears /run: their pid file and sockets would stop them
// starting.
var startScript = fmt.Sprintf(`if docker version >/dev/null 2>&1; then exit 0; fi
rm -rf /var/run/docker.pid /var/run/docker
setsid dockerd --data-root %[1]s >>%[2]s 2>&1 </dev/null &
i=0
while ! docker version >/dev/null 2>&1; do
	if ! kill -0 $! 2>/dev/null; then echo "dockerd exited:" >&2; tail -n 20 %[2]s >&2; exit 1; fi
	i=$((i+1)); if [ $i -gt %[3]d ]; then echo "dockerd did not answer in %[4]s:" >&2; tail -n 20 %[2]s >&2; exit 1; fi
	sleep 0.1
done`, DataDir, logPath, int(readyTimeout/(100*time.Millisecond)), readyTimeout)

// Start starts dockerd in the Sandbox id, just booted, and returns once it
// answers; a dockerd already answering is left as it is. An error carries
// the end of dockerd's log.
func Start(ctx context.Context, b sandbox.Backend, id string) error {
	if err := run(ctx, b, id, startScript); err != nil {
		return fmt.Errorf("start dockerd in the Sandbox: %w", err)
	}
	return nil
}

// stopScript stops every running container, each given stopTimeout
// seconds, when dockerd is there and answers.
var stopScript = fmt.Sprintf(`command -v docker >/dev/null 2>&1 && [ -S /var/run/docker.sock ] || exit 0
docker version >/dev/null 2>&1 || exit 0
ids=$(docker ps -q)
[ -z "$ids" ] || docker stop -t %d $ids`, stopTimeout)

// StopContainers runs docker stop on the Sandbox's running containers,
// so that databases in them shut down cleanly before the Sandbox stops.
// A Sandbox without a dockerd answering has none to stop.
func StopContainers(ctx context.Context, b sandbox.Backend, id string) error {
	if err := run(ctx, b, id, stopScript); err != nil {
		return fmt.Errorf("docker stop in the Sandbox: %w", err)
	}
	return nil
}

func run(ctx context.Context, b sandbox.Backend, id, script string) error {
	_, err := sandbox.Output(ctx, b, id, sandbox.Cmd{Args: []string{"sh", "-c", script}, Env: path})
	return err
}
