package oci_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/dockerd"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testkit"
)

// importImage makes a container image in the Sandbox's dockerd from the
// image's static busybox: no registry is reachable here, nor needed.
const importImage = `mkdir -p /tmp/img/bin && cp /bin/busybox /tmp/img/bin/busybox &&
	for a in $(busybox --list); do [ $a = busybox ] || ln -s busybox /tmp/img/bin/$a; done &&
	tar -C /tmp/img -c . | docker import -c 'ENV PATH=/bin' - kndl-test/busybox >/dev/null && echo imported`

// TestDockerInASandbox: with Docker on, dockerd runs inside the Sandbox on
// crun, its data on the Sandbox's Docker disk; a container of an image made
// there runs, nested in the Sandbox's user namespace, and publishes a port
// through docker-proxy; Compose brings up a service on a network of its
// own. What confines the Sandbox still holds around its
// containers: no new privileges, seccomp, no host port, its own cgroup
// limits out of its reach. docker stop ends its containers cleanly, and
// its images and containers outlive a Stop.
func TestDockerInASandbox(t *testing.T) {
	requireOCI(t)
	rootfs := testkit.DockerRootfs(t)
	ctx := context.Background()
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)})
	// Another backend's Sandboxes on the host (a Runner, another test
	// process) may hold user namespaces of their own.
	usernsBefore := usernsMounts()
	host, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	id := start(t, b, sandbox.Spec{ID: "docker", Layers: []string{rootfs}, Docker: true,
		Disks:     []sandbox.Disk{{Name: dockerd.Disk, Target: dockerd.DataDir}},
		Resources: sandbox.Resources{MemoryMiB: 1024}})
	if err := dockerd.Start(ctx, b, id); err != nil {
		t.Fatal(err)
	}
	if got := run(t, b, id, importImage); got != "imported" {
		t.Fatalf("docker import: %s", got)
	}
	st, err := b.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	gw := st.Addr.As4()
	gw[3]-- // the host's end of the Sandbox's veth
	hostPort := fmt.Sprintf("%s %d", net.IP(gw[:]), host.Addr().(*net.TCPAddr).Port)

	// uid_map reads the same from the Sandbox and from a container in its
	// user namespace: the Sandbox's range, not the host's whole one.
	const uidMap = "awk '{print $2, $3}' /proc/self/uid_map"
	sandboxMap := run(t, b, id, uidMap)
	if sandboxMap == "0 4294967295" || sandboxMap == "" {
		t.Fatalf("the Sandbox's uid_map reads %q: it is in the host's user namespace", sandboxMap)
	}
	tests := []struct{ what, script, want string }{
		// The default set (TestHardening's), and SYS_ADMIN NET_ADMIN NET_RAW
		// MKNOD: bits 21 12 13 27.
		{"the Sandbox's root holds dockerd's capabilities and no more", "grep ^CapEff: /proc/self/status | cut -f2", "00000000a82435fb"},
		{"a container runs", "docker run --rm kndl-test/busybox echo hello from a container", "hello from a container"},
		{"a container runs with docker's init", "docker run --rm --init kndl-test/busybox sh -c 'echo pid1 is $(cat /proc/1/comm)' 2>&1", "pid1 is docker-init"},
		{"it is in the Sandbox's user namespace, not the host's",
			"docker run --rm kndl-test/busybox " + uidMap, sandboxMap},
		{"it has no new privileges and seccomp", "docker run --rm kndl-test/busybox grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '", "NoNewPrivs: 1\nSeccomp: 2"},
		{"a published port is held by docker-proxy",
			`docker run -d -p 8080:80 kndl-test/busybox httpd -f -p 80 -h /etc >/dev/null &&
			for i in $(seq 50); do wget -q -O - http://127.0.0.1:8080/hostname 2>/dev/null && break; sleep 0.1; done >/dev/null &&
			pgrep -a docker-proxy | grep -q 'host-port 8080 ' && echo held`, "held"},
		{"Compose makes a network whose services answer by name",
			`mkdir -p /root/app && printf 'version: "2"\nservices:\n  web:\n    image: kndl-test/busybox\n    command: httpd -f -p 80 -h /etc\n' > /root/app/docker-compose.yml &&
			cd /root/app && docker-compose up -d >/dev/null 2>&1 &&
			docker run --rm --network app_default kndl-test/busybox sh -c 'for i in $(seq 50); do wget -q -O /dev/null http://web/hostname 2>/dev/null && echo web answered && exit; sleep 0.1; done' &&
			docker-compose down >/dev/null 2>&1`, "web answered"},
		{"the host's ports stay out of its reach", "docker run --rm kndl-test/busybox nc -w 3 " + hostPort + " </dev/null 2>/dev/null && echo reached || echo refused", "refused"},
		{"the Sandbox's own limits stay out of its reach",
			`for f in memory/memory.limit_in_bytes memory.max pids/pids.max pids.max; do test -f /sys/fs/cgroup/$f && { echo max > /sys/fs/cgroup/$f || echo 9999999999 > /sys/fs/cgroup/$f; } 2>/dev/null && echo "raised $f"; done; echo done`, "done"},
		// Its weight, which the parent cgroup's is summed from.
		{"the Sandbox's CPU weight stays out of its reach",
			`n=0; for f in cpu/cpu.shares cpu.weight; do test -f /sys/fs/cgroup/$f || continue; n=$((n+1)); { echo 10000 > /sys/fs/cgroup/$f; } 2>/dev/null && echo "raised $f"; done; echo "tried $n"`, "tried 1"},
		{"docker stop ends a container cleanly",
			`mkdir -p /root/state && docker run -d --name db -v /root/state:/state kndl-test/busybox sh -c 'trap "echo clean > /state/stopped; exit 0" TERM; while :; do sleep 0.1; done' >/dev/null`, ""},
	}
	for _, tc := range tests {
		if got := run(t, b, id, tc.script); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.what, got, tc.want)
		}
	}
	if err := dockerd.StopContainers(ctx, b, id); err != nil {
		t.Fatal(err)
	}
	if got := run(t, b, id, "cat /root/state/stopped; docker ps -q | wc -l"); got != "clean\n0" {
		t.Errorf("after docker stop: got %q, want the container's own clean exit and none running", got)
	}
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := dockerd.Start(ctx, b, id); err != nil {
		t.Fatal(err)
	}
	if got := run(t, b, id, "docker ps -a --format '{{.Names}}' --filter name=db; docker run --rm kndl-test/busybox echo again"); got != "db\nagain" {
		t.Errorf("after a Stop and Start: got %q, want the container and image kept on the Docker disk", got)
	}
	// The user namespace that owned its network goes with it.
	if err := b.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, m := range usernsMounts() {
		if !slices.Contains(usernsBefore, m) {
			t.Errorf("a removed Docker Sandbox left its user namespace bound at %s", m)
		}
	}
}

// usernsMounts are the user namespaces bound under /run/kndl-userns.
func usernsMounts() []string {
	var got []string
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/run/kndl-userns/") {
				got = append(got, f)
			}
		}
	}
	return got
}

// TestDockerIsRefusedOnGVisor: the gvisor backend says it runs no Docker,
// and refuses a Sandbox with it, naming the way out.
func TestDockerIsRefusedOnGVisor(t *testing.T) {
	base := requireOCI(t)
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t),
		Runtime: "runsc", RuntimePath: testkit.Runsc(t)})
	why := b.Host().NoDocker
	if !strings.Contains(why, "RUNNER_SANDBOX_BACKEND=crun") || !strings.Contains(why, "gVisor") {
		t.Errorf("NoDocker = %q, want it to name gVisor and RUNNER_SANDBOX_BACKEND=crun", why)
	}
	err := b.Create(context.Background(), sandbox.Spec{ID: "docker", Layers: []string{base}, Docker: true})
	if !errors.Is(err, sandbox.ErrNotSupported) || !strings.Contains(err.Error(), why) {
		t.Fatalf("Create with Docker on gVisor: %v, want ErrNotSupported saying %q", err, why)
	}
	if all, _ := b.List(context.Background()); len(all) != 0 {
		t.Errorf("a refused Create left %v", all)
	}
	if crun := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)}); crun.Host().NoDocker != "" {
		t.Errorf("crun says it runs no Docker: %s", crun.Host().NoDocker)
	}
}

// BenchmarkDockerInASandbox is what Docker adds to a Session on crun:
// dockerd's start after a boot (its Docker disk holding one image, as at a
// wake), with the Stop and Start around it outside the timer, and one
// `docker run --rm` of that image. Medians over the iterations.
//
//	CGO_ENABLED=0 go test -run '^$' -bench DockerInASandbox -benchtime 10x ./internal/sandbox/oci/
func BenchmarkDockerInASandbox(b *testing.B) {
	requireOCI(b)
	rootfs := testkit.DockerRootfs(b)
	ctx := context.Background()
	be := newBackend(b, oci.Options{StateDir: filepath.Join(b.TempDir(), "state"), RelayPort: freePort(b), Logger: quiet})
	if err := be.Create(ctx, sandbox.Spec{ID: "bench-docker", Layers: []string{rootfs}, Docker: true,
		Disks: []sandbox.Disk{{Name: dockerd.Disk, Target: dockerd.DataDir}}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Remove(ctx, "bench-docker") })
	if err := be.Start(ctx, "bench-docker"); err != nil {
		b.Fatal(err)
	}
	if err := dockerd.Start(ctx, be, "bench-docker"); err != nil {
		b.Fatal(err)
	}
	if out := run(b, be, "bench-docker", importImage); out != "imported" {
		b.Fatalf("docker import: %s", out)
	}
	b.Run("dockerd start", func(b *testing.B) {
		var times []time.Duration
		for b.Loop() {
			b.StopTimer()
			if err := be.Stop(ctx, "bench-docker"); err != nil {
				b.Fatal(err)
			}
			if err := be.Start(ctx, "bench-docker"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			if err := dockerd.Start(ctx, be, "bench-docker"); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
		}
		b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
	})
	b.Run("docker run", func(b *testing.B) {
		var times []time.Duration
		for b.Loop() {
			start := time.Now()
			if out := run(b, be, "bench-docker", "docker run --rm kndl-test/busybox true && echo ran"); out != "ran" {
				b.Fatalf("docker run: %s", out)
			}
			times = append(times, time.Since(start))
		}
		b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
	})
}
