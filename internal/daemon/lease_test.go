package daemon

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/testenv"
)

// asKndl, set in a process's environment to a command's words ("hub"),
// makes this test binary run that kndl command instead of its tests
// (TestMain): a real process, to kill.
const asKndl = "KNDL_TEST_RUN_AS_KNDL"

// kndlProcess is a kndl command running in a process of its own, its
// output kept.
type kndlProcess struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder // stdout and stderr, as lines came
}

// startKndl runs kndl args in a new process with env alone as its
// environment, killed when the test ends.
func startKndl(t *testing.T, env map[string]string, args ...string) *kndlProcess {
	t.Helper()
	p := &kndlProcess{cmd: exec.Command(os.Args[0])}
	p.cmd.Env = []string{asKndl + "=" + strings.Join(args, " "), "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		w.Close()
	})
	return p
}

// said returns the first match of re in what the process has written so
// far, nil if none.
func (p *kndlProcess) said(re *regexp.Regexp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return re.FindStringSubmatch(p.out.String())
}

// await waits up to within for the process to write a match of re.
func (p *kndlProcess) await(t *testing.T, within time.Duration, what string, re *regexp.Regexp) []string {
	t.Helper()
	testenv.Eventually(t, within, what, func() bool { return p.said(re) != nil })
	return p.said(re)
}

func (p *kndlProcess) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

var serving = regexp.MustCompile(`kndl hub: serving \S+ on (\S+)`)

// TestASecondHubWaitsAsAStandbyAndTakesOverWhenTheFirstIsKilled: a second
// kndl hub on the store of a running one says who holds it and waits,
// listening on nothing; when the first process is killed, it takes over
// within 10 s and answers /health. On a SQLite file (the lock file beside
// it) and on a PostgreSQL database (the advisory lock).
func TestASecondHubWaitsAsAStandbyAndTakesOverWhenTheFirstIsKilled(t *testing.T) {
	stores := []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"sqlite", func(t *testing.T) map[string]string {
			return map[string]string{"HUB_DATABASE_PATH": filepath.Join(t.TempDir(), "hub.db")}
		}},
		{"postgres", func(t *testing.T) map[string]string {
			return map[string]string{"HUB_DATABASE_URL": testenv.Postgres(t)}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			env := st.env(t)
			env["HUB_SECRETS_KEY"], env["HUB_LISTEN"] = seal.NewKey(), "127.0.0.1:0"
			hubOn := func() *kndlProcess {
				home := map[string]string{"KNDL_HOME": t.TempDir()}
				for k, v := range env {
					home[k] = v
				}
				return startKndl(t, home, "hub")
			}
			first := hubOn()
			first.await(t, testenv.WaitMedium, "the first Hub serves", serving)

			second := hubOn()
			holder := regexp.MustCompile(`waiting as a standby.*holder="kndl hub, pid ` + strconv.Itoa(first.cmd.Process.Pid) + ` `)
			second.await(t, testenv.WaitMedium, "the second Hub says it waits as a standby, naming the first", holder)
			if second.said(serving) != nil {
				t.Fatalf("the standby serves while the first Hub holds the store:\n%s", second)
			}

			if err := first.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			first.cmd.Wait()
			killed := time.Now()
			addr := second.await(t, testenv.WaitMedium, "the standby serves once the first Hub is killed", serving)[1]
			took := time.Since(killed)
			if took > 10*time.Second {
				t.Errorf("the standby took over %s after the first Hub was killed, want within 10 s", took.Round(time.Millisecond))
			}
			t.Logf("the standby took over %s after the first Hub was killed", took.Round(time.Millisecond))
			resp, err := http.Get("http://" + addr + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /health on the Hub that took over: %v, %v\n%s", resp, err, second)
			}
			resp.Body.Close()
		})
	}
}
