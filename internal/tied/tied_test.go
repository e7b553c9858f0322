package tied

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/testenv"
)

// tiedParent, set in this test binary's environment, makes
// TestAChildStartedTiedDiesWithItsParent the parent: it starts a child
// tied to it, prints the child's pid and waits to be killed.
const tiedParent = "KNDL_TIED_PARENT"

// TestAChildStartedTiedDiesWithItsParent: a process that started a child
// with Start is SIGKILLed; the child is gone within WaitShort rather
// than running on (without Pdeathsig it runs its 10 minutes).
func TestAChildStartedTiedDiesWithItsParent(t *testing.T) {
	if os.Getenv(tiedParent) == "1" {
		child := exec.Command("sleep", "600")
		if err := Start(child); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(child.Process.Pid)
		select {}
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestAChildStartedTiedDiesWithItsParent$")
	parent.Env = append(os.Environ(), tiedParent+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the parent printed %q, want its child's pid", line)
	}
	defer syscall.Kill(pid, syscall.SIGKILL) // should the test fail
	if !alive(pid) {
		t.Fatalf("the child %d is gone before its parent died", pid)
	}
	parent.Process.Kill()
	parent.Wait()
	testenv.Eventually(t, testenv.WaitShort, fmt.Sprintf("the child %d still runs after its parent was killed", pid), func() bool { return !alive(pid) })
}

// alive reports whether pid runs: it exists and is no zombie waiting for
// whoever inherited it to reap it.
func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(st), ')')
	return i > 0 && len(st) > i+2 && st[i+2] != 'Z'
}

// TestAChildStartedTiedOutlivesTheThreadThatAskedForIt: a child started
// from a goroutine locked to its thread, which then exits so that the
// runtime ends the thread (as a network namespace switch does), runs on
// when started with Start; started with Pdeathsig alone, the same way, it
// is killed with the thread.
func TestAChildStartedTiedOutlivesTheThreadThatAskedForIt(t *testing.T) {
	// startOnAThreadThatEnds starts a child from a thread that then ends,
	// and returns its pid once the thread is gone. The runtime keeps the
	// main thread rather than end it, so a try that landed there is
	// made again.
	startOnAThreadThatEnds := func(start func(*exec.Cmd) error) int {
		for try := 0; try < 10; try++ {
			child := exec.Command("sleep", "600")
			tid := make(chan int)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
				if err := start(child); err != nil {
					t.Error(err)
					tid <- 0
					return
				}
				tid <- unix.Gettid()
			}()
			id := <-tid
			if id == 0 {
				t.FailNow()
			}
			t.Cleanup(func() { child.Process.Kill(); child.Wait() })
			task := fmt.Sprintf("/proc/self/task/%d", id)
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(task); err != nil {
					return child.Process.Pid
				}
			}
		}
		t.Fatal("no try's thread ended")
		return 0
	}
	plain := startOnAThreadThatEnds(func(c *exec.Cmd) error {
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return c.Start()
	})
	testenv.Eventually(t, testenv.WaitShort, "the plain child killed with the thread that forked it", func() bool { return !alive(plain) })
	tied := startOnAThreadThatEnds(Start)
	time.Sleep(100 * time.Millisecond)
	if !alive(tied) {
		t.Fatalf("the child started with Start (%d) died with the thread that asked for it", tied)
	}
}
