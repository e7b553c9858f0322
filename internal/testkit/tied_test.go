package testkit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/testenv"
)

// tiedParent, set in this test binary's environment, makes
// TestAChildStartedTiedDiesWithItsParent the parent: it starts a child
// tied to it, prints the child's pid and waits to be killed.
const tiedParent = "KNDL_TESTKIT_TIED_PARENT"

// TestAChildStartedTiedDiesWithItsParent: a process that started a child
// with StartTied is SIGKILLed; the child is gone within WaitShort rather
// than running on (without Pdeathsig it runs its 10 minutes). That no
// thread's end takes the child along early is StartTied's lock, reasoned
// from prctl(2) rather than tested: which thread the runtime ends can't be
// chosen from here.
func TestAChildStartedTiedDiesWithItsParent(t *testing.T) {
	if os.Getenv(tiedParent) == "1" {
		child := exec.Command("sleep", "600")
		if err := StartTied(child); err != nil {
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
