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

// initDir is a tmpfs the start mounts for docker-init (docker run --init):
// see startScript.
const initDir = "/run/kndl-docker-init"

// startScript starts dockerd detached from the exec (its parent becomes
// the Sandbox's init) and waits for it to answer. What dockerd and its
// containerd left under /var/run at the last boot is cleared first, as a
// machine's reboot clears /run: their pid file and sockets would stop them
// starting.
//
// docker run --init binds docker-init into the container read-only. The
// Sandbox's root filesystem is nosuid and nodev, flags the Sandbox's user
// namespace may not clear, and runc before 1.2 (Debian 12's 1.1.5)
// remounts the bind read-only without them: "operation not permitted". A
// copy on a tmpfs the Sandbox mounts itself carries no such flags. Left
// out if the image's daemon.json names an init-path (dockerd refuses one
// given twice) or the mount fails.
var startScript = fmt.Sprintf(`if docker version >/dev/null 2>&1; then exit 0; fi
rm -rf /var/run/docker.pid /var/run/docker
init=
if p=$(command -v docker-init) && ! grep -qs '"init-path"' /etc/docker/daemon.json &&
	mkdir -p %[5]s && { mountpoint -q %[5]s || mount -t tmpfs -o mode=0755,size=8m kndl-docker-init %[5]s; } &&
	cp -L "$p" %[5]s/docker-init; then
	init="--init-path %[5]s/docker-init"
fi
setsid dockerd --data-root %[1]s $init >>%[2]s 2>&1 </dev/null &
i=0
while ! docker version >/dev/null 2>&1; do
	if ! kill -0 $! 2>/dev/null; then echo "dockerd exited:" >&2; tail -n 20 %[2]s >&2; exit 1; fi
	i=$((i+1)); if [ $i -gt %[3]d ]; then echo "dockerd did not answer in %[4]s:" >&2; tail -n 20 %[2]s >&2; exit 1; fi
	sleep 0.1
done`, DataDir, logPath, int(readyTimeout/(100*time.Millisecond)), readyTimeout, initDir)

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
