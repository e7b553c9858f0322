package mod

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// BenchmarkHookCPU measures the CPU one hook event costs, the process
// each of the mod's hooks starts and all it starts, summed from rusage:
// the kndl binary's `kndl mod hook`, which the hooks ran, beside the bash
// script they run now, each carrying the same events to one relay. It
// prints one line with both and their ratio.
//
//	go test -run '^$' -bench HookCPU -benchtime 100x ./internal/mod/
func BenchmarkHookCPU(b *testing.B) {
	bash := testenv.RequireCommand(b, "bash")
	testenv.RequireCommand(b, "go")
	dir := b.TempDir()
	kndl := filepath.Join(dir, "kndl")
	// Built as scripts/build-kndl builds a release.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", kndl, "kndl.dev/kndl/cmd/kndl")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	if err := WriteCopy(filepath.Join(dir, "mod")); err != nil {
		b.Fatal(err)
	}
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "{}")
	}))
	defer relay.Close()
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "KNDL_URL=" + relay.URL, "KNDL_MOD_TOKEN=kndls_tok"}
	// A PostToolUse of a short Bash command, as Claude Code sends it.
	event := []byte(`{"session_id":"0b6f5bd4-6d3e-4c1e-9d0a-3f1c2e7a9b10","transcript_path":"/root/.claude/projects/-workspace/0b6f5bd4.jsonl","cwd":"/workspace","permission_mode":"bypassPermissions","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls","description":"List files"},"tool_response":{"stdout":"README.md\ngo.mod\n","stderr":"","interrupted":false},"tool_use_id":"toolu_01"}`)
	paths := []struct {
		name string
		argv []string
	}{
		{"kndl mod hook", []string{kndl, "mod", "hook"}},
		{"hook.bash", []string{bash, filepath.Join(dir, "mod", "hub-link", "hooks", "hook.bash")}},
	}
	cpu := make([]time.Duration, len(paths))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, p := range paths {
			cpu[j] += hookCPU(b, p.argv, env, event)
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	ratio := float64(cpu[1]) / float64(cpu[0])
	b.ReportMetric(per(cpu[0]), "ms-cpu/kndl-event")
	b.ReportMetric(per(cpu[1]), "ms-cpu/script-event")
	b.ReportMetric(ratio, "ratio")
	fmt.Printf("hook CPU an event, %d events of %d bytes, %d CPUs: %s %.2f ms, %s %.2f ms, ratio %.3f\n",
		b.N, len(event), runtime.NumCPU(), paths[0].name, per(cpu[0]), paths[1].name, per(cpu[1]), ratio)
}

// hookCPU runs one hook with event on stdin and returns the CPU it spent,
// its own and its children's.
func hookCPU(b *testing.B, argv, env []string, event []byte) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Stdin = env, bytes.NewReader(event)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || out.String() != "{}" {
		b.Fatalf("%s: %v, stdout %q, stderr %q; want the relay's answer", argv, err, out.String(), errOut.String())
	}
	u := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return time.Duration(syscall.TimevalToNsec(u.Utime) + syscall.TimevalToNsec(u.Stime))
}
