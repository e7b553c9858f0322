package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdleHelpersMemory is the memory kndl's helpers hold in an idle
// Sandbox (its init, which runs the transcript follower and the ports
// watcher, internal/inithost, and tmux) beside Claude Code's own in the
// same Sandbox: one Session, its first
// Turn over, read from /proc/PID/smaps_rollup once an iteration, a second
// apart. It prints each process, the Sandbox's memory cgroup, and then the
// pair and the ratio (target at most 0.05) as one line:
//
//	idle-helpers-memory helpers-anon-MiB=… claude-anon-MiB=… ratio=… load=… host=…
//
// The figures are the last iteration's, when the helpers have been idle
// longest. crun only: on gVisor a Sandbox's processes are not in the
// host's /proc.
func BenchmarkIdleHelpersMemory(b *testing.B) {
	s := Start(b)
	if rt, _ := sandboxRuntime(b); rt == "runsc" {
		b.Skip("gVisor: the Sandbox's processes are out of the host's /proc")
	}
	v := s.Ready("idle memory", "ok")
	var procs []idleProc
	for b.Loop() {
		time.Sleep(time.Second)
		procs = sandboxAnon(b, v.ID)
	}
	var helpers, claude int64
	sort.Slice(procs, func(i, j int) bool { return procs[i].anon > procs[j].anon })
	for _, p := range procs {
		fmt.Printf("idle-helpers-memory-process %q anon-KiB=%d\n", p.name, p.anon>>10)
		if p.claude {
			claude += p.anon
		} else {
			helpers += p.anon
		}
	}
	if claude == 0 {
		b.Fatalf("no Claude Code in Session %s's Sandbox: %v", v.ID, procs)
	}
	ratio := float64(helpers) / float64(claude)
	b.ReportMetric(float64(helpers)/(1<<20), "helpers-anon-MiB")
	b.ReportMetric(float64(claude)/(1<<20), "claude-anon-MiB")
	b.ReportMetric(ratio, "helpers/claude")
	load, _ := os.ReadFile("/proc/loadavg")
	usage, rss := cgroupMemory(sandboxCgroup("memory", "s-"+v.ID))
	fmt.Printf("idle-helpers-memory-cgroup usage-MiB=%.1f anon-MiB=%.1f\n", float64(usage)/(1<<20), float64(rss)/(1<<20))
	fmt.Printf("idle-helpers-memory helpers-anon-MiB=%.2f claude-anon-MiB=%.2f ratio=%.3f target=0.05 load=%s host=%q\n",
		float64(helpers)/(1<<20), float64(claude)/(1<<20), ratio, strings.Fields(string(load))[0], cpuModel())
}

// idleProc is one process of a Sandbox and its anonymous memory.
type idleProc struct {
	name   string
	claude bool
	anon   int64
}

// sandboxAnon reads the anonymous memory of each process in Session id's
// Sandbox.
func sandboxAnon(t testing.TB, id string) []idleProc {
	pids := sandboxPids("s-" + id)
	if len(pids) == 0 {
		t.Fatalf("Session %s: no processes in its Sandbox's memory cgroup", id)
	}
	var out []idleProc
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		out = append(out, idleProc{
			name:   procName(pid),
			claude: strings.HasPrefix(string(cmd), claudeCodeCmd),
			anon:   readSmaps("/proc/" + pid + "/smaps_rollup").anon,
		})
	}
	return out
}

// helperProcesses lists the kndl helpers that run as processes of their
// own in Session id's Sandbox, read inside it (on every backend): none
// once each has handed its stdio to init (internal/inithost).
func helperProcesses(t *testing.T, s *System, id string) []string {
	t.Helper()
	out, code := s.Exec(id, "sh", "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline; echo; done 2>/dev/null`)
	if code != 0 {
		t.Fatalf("list the Sandbox's processes: exit %d: %s", code, out)
	}
	var helpers []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "kndl transcript follow") || strings.Contains(line, "kndl ports watch") {
			helpers = append(helpers, strings.TrimSpace(line))
		}
	}
	return helpers
}
