package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// buildImage is a Start script that makes a container image in the
// Sandbox's dockerd from the image's own busybox and the libraries it
// links: no registry is reachable here, nor needed.
const buildImage = `mkdir -p /tmp/img/bin && cp /bin/busybox /tmp/img/bin/
for l in $(ldd /bin/busybox | grep -o '/[^ ]*'); do mkdir -p /tmp/img$(dirname $l) && cp -L $l /tmp/img$l; done
for a in $(busybox --list); do [ $a = busybox ] || ln -s busybox /tmp/img/bin/$a; done
tar -C /tmp/img -c . | docker import -c 'ENV PATH=/bin' - kndl-test/busybox >/dev/null
echo "image built: $(docker images -q kndl-test/busybox | wc -l)"
`

// TestDockerRunsInASandboxAndItsContainersStopCleanlyAtSleep: an
// Environment with Docker on is a build input (a Test build first, the
// change in the log); its Build installs Debian's docker.io, dockerd runs
// in each Sandbox before the Start script, which builds an image, and a
// container of it runs from Claude's Bash; one publishing a port shows
// among the open ports, held by docker-proxy. A sleep runs docker stop on the
// Sandbox's containers, so one that traps SIGTERM exits cleanly, and the
// woken Sandbox's dockerd still has it. On gVisor, the Test build is
// refused, naming the way out.
func TestDockerRunsInASandboxAndItsContainersStopCleanlyAtSleep(t *testing.T) {
	t.Parallel()
	s := Start(t)
	runtime, _ := sandboxRuntime(t)
	if runtime == "crun" {
		testkit.RequireDebianMirror(t) // the Build installs Docker with apt
	}
	repo := s.Repo()
	dir := t.TempDir()
	start, bootstrap := filepath.Join(dir, "start.sh"), filepath.Join(dir, "bootstrap.sh")
	if err := os.WriteFile(start, []byte(buildImage), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same Bootstrap script each run, so a host makes this Build once
	// (34 s of the test's 58 alone) and keeps it in the Runners' Builds the
	// e2e tests share (cached): internal/build's
	// TestABuildWithDockerInstallsItWithTheImagesPackageManager installs
	// Docker with apt on every run.
	if err := os.WriteFile(bootstrap, []byte("echo bootstrap of the Docker test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--docker", "--start-file", start, "--bootstrap-file", bootstrap); code != 0 || !strings.Contains(out, "docker: off -> on") || !strings.Contains(out, "kndl env test must pass") {
		t.Fatalf("kndl env edit --docker: exit %d\n%s\n%s; want Docker on in a draft that needs a Test build", code, out, errOut)
	}
	out, errOut, code := s.kndl("", "env", "test", "--repo", repo)
	if runtime == "runsc" {
		if code == 0 || !strings.Contains(out+errOut, "RUNNER_SANDBOX_BACKEND=crun") || strings.Contains(out, "installing Docker") {
			t.Fatalf("kndl env test with Docker on gVisor: exit %d\n%s\n%s; want refused before the Build, naming RUNNER_SANDBOX_BACKEND=crun", code, out, errOut)
		}
		t.Logf("refused on gVisor:\n%s%s", out, errOut)
		return
	}
	made := strings.Contains(out, "installing Docker") || strings.Contains(out, "using the Build made")
	if code != 0 || !made || !strings.Contains(out, "starting dockerd") || !strings.Contains(out, "image built: 1") || !strings.Contains(out, "The Test build passed") {
		t.Fatalf("kndl env test: exit %d\n%s\n%s; want Docker installed (or the Build that did), dockerd started and the image built", code, out, errOut)
	}
	s.applyVersion(repo, 1, "docker: off -> on")

	s.Model.On(testkit.PromptContains("run a container"), testkit.Bash("docker run --rm kndl-test/busybox echo hello from a container && "+
		`docker run -d --name db -v /root/state:/state kndl-test/busybox sh -c 'trap "echo stopped cleanly > /state/stopped; exit 0" TERM; while :; do sleep 0.1; done' >/dev/null && echo db up`))
	s.Model.On(testkit.PromptContains("how did it stop"), testkit.Bash("cat /root/state/stopped; docker ps -a --filter name=db --format '{{.Status}}'"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done."))
	v := s.NewSession(repo, "run a container")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the container's output", func(e protocol.Event) bool { return e.Kind == protocol.EventToolResult })
	if r := toolResult(s.Events(v.ID), "Bash"); strings.TrimSpace(r) != "hello from a container\ndb up" {
		t.Fatalf("Claude's Bash gave %q, want the container's line and the db container up", r)
	}
	s.turnEnds(v.ID, 1)

	// A port a container publishes is among the Session's open ports, as
	// the Hub sends them to its view: held by docker-proxy in the Sandbox.
	// httpd as a container's pid 1 would ignore SIGTERM, and the sleep's
	// docker stop would wait out its 10 s for it: a shell that traps TERM
	// runs it (docker run --init fails here: runc cannot bind docker-init
	// read-only in the Sandbox's user namespace). It is asked for a page
	// until it answers, with the Sandbox's busybox: the Sandbox has no
	// wget of its own, and a bare wget failed each of 50 tries, 5.5 s.
	s.inSandbox(v.ID, `docker run -d -p 8080:80 kndl-test/busybox sh -c 'trap "exit 0" TERM; httpd -f -p 80 -h /etc & wait' >/dev/null &&
		for i in $(seq 50); do busybox wget -q -O /dev/null http://127.0.0.1:8080/hostname 2>/dev/null && exit 0; sleep 0.1; done; echo httpd never answered; exit 1`)
	ports := viewPorts(t, s, v.ID, listening(8080))
	if i := slices.IndexFunc(ports, func(p api.Port) bool { return p.Port.Port == 8080 }); i < 0 || ports[i].Process != "docker-proxy" {
		t.Fatalf("open ports %+v: want 8080 held by docker-proxy", ports)
	}

	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	s.waitState(v.ID, api.Asleep)
	s.prompt(v.ID, "how did it stop?")
	e := s.WaitEvent(v.ID, testenv.WaitMedium, "the woken Session's tool output", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && strings.Contains(e.Text, "Exited")
	})
	if r := e.Text; !strings.HasPrefix(r, "stopped cleanly\nExited (0)") {
		t.Fatalf("after the sleep: %q, want the container stopped by docker stop (its trap ran, exit 0) and kept", r)
	}
}
