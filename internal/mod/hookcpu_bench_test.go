package mod

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// BenchmarkHookCPU measures the CPU one hook event costs: for a command
// hook, the process the hook starts and all it starts, summed from rusage;
// for the hook door, which Claude Code's http hook posts to and the
// Sandbox's init serves, what the door's process spends on the event. It
// runs the kndl binary's `kndl mod hook`, which the hooks ran, beside the
// bash script they run where the init serves no door and the door they
// post to where it does, each carrying the same events to one relay, and
// prints one line with each figure and its ratio to the first.
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
	door := startDoor(b, relay.URL)
	paths := []struct {
		name string
		cpu  func() time.Duration
	}{
		{"kndl_mod_hook", func() time.Duration { return hookCPU(b, []string{kndl, "mod", "hook"}, env, event) }},
		{"hook_bash", func() time.Duration {
			return hookCPU(b, []string{bash, filepath.Join(dir, "mod", "hub-link", "hooks", "hook.bash")}, env, event)
		}},
		{"door", func() time.Duration { return door.post(b, event) }},
	}
	cpu := make([]time.Duration, len(paths))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, p := range paths {
			cpu[j] += p.cpu()
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	load, _ := os.ReadFile("/proc/loadavg")
	line := fmt.Sprintf("hookcpu events=%d bytes=%d cpus=%d load=%s", b.N, len(event), runtime.NumCPU(), strings.Fields(string(load))[0])
	for j, p := range paths {
		b.ReportMetric(per(cpu[j]), "ms-cpu/"+p.name)
		line += fmt.Sprintf(" %s_ms=%.3f", p.name, per(cpu[j]))
	}
	for j, p := range paths[1:] {
		ratio := float64(cpu[j+1]) / float64(cpu[0])
		b.ReportMetric(ratio, p.name+"-ratio")
		line += fmt.Sprintf(" %s_ratio=%.4f", p.name, ratio)
	}
	fmt.Println(line)
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

// doorProc is a hook door in a process of its own, as the Sandbox's init
// serves it: this test binary run again (TestMain), which says its address
// and, for each line on its stdin, the CPU it has spent so far.
type doorProc struct {
	url    string
	in     io.Writer
	out    *bufio.Reader
	client *http.Client
}

// doorHelperEnv makes this test binary a hook door to the relay it names.
const doorHelperEnv = "KNDL_TEST_HOOK_DOOR_RELAY"

func TestMain(m *testing.M) {
	if relay := os.Getenv(doorHelperEnv); relay != "" {
		serveDoorHelper(relay)
		return
	}
	os.Exit(m.Run())
}

func serveDoorHelper(relay string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go http.Serve(ln, NewDoor(relay))
	fmt.Println(ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var u syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &u)
		fmt.Println(syscall.TimevalToNsec(u.Utime) + syscall.TimevalToNsec(u.Stime))
	}
}

func startDoor(b *testing.B, relayURL string) *doorProc {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), doorHelperEnv+"="+relayURL)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	d := &doorProc{in: in, out: bufio.NewReader(out),
		// A connection for each event: Claude Code's http hooks were not
		// seen to keep one, and a new one costs the door more.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	addr, err := d.out.ReadString('\n')
	if err != nil {
		b.Fatalf("the door helper: %v", err)
	}
	d.url = "http://" + strings.TrimSpace(addr)
	return d
}

// cpu is what the door's process has spent so far.
func (d *doorProc) cpu(b *testing.B) time.Duration {
	io.WriteString(d.in, "\n")
	line, err := d.out.ReadString('\n')
	n, err2 := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || err2 != nil {
		b.Fatalf("the door helper's CPU: %q, %v", line, err)
	}
	return time.Duration(n)
}

// post posts one event to the door as Claude Code's http hook does and
// returns the CPU the door spent on it.
func (d *doorProc) post(b *testing.B, event []byte) time.Duration {
	before := d.cpu(b)
	req, _ := http.NewRequest(http.MethodPost, d.url+"/mod/hook", bytes.NewReader(event))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer kndls_tok")
	resp, err := d.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(answer) != "{}" {
		b.Fatalf("the door answered %d %q, want the relay's answer", resp.StatusCode, answer)
	}
	return d.cpu(b) - before
}
