package inithost

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// namespaces are those whose difference would let a job see more than its
// caller: files (mnt), listeners (net), processes (pid) and privilege
// (user).
var namespaces = []string{"mnt", "net", "pid", "user"}

// peerCheck refuses a caller that holds less than this process (init): a
// job it hands over must not run with more privilege than the caller had,
// had it run the job itself. The caller must be root (every id), hold each
// of init's capabilities (effective, permitted, bounding), share init's
// mount, network, PID and user namespaces, and have no more seccomp
// filters. In a Sandbox the Runner's commands run as root with the
// Sandbox's capabilities, as init does; what dropped any of it (a user,
// a capability set, a container of Docker in the Sandbox, a bubblewrap) is
// refused.
//
// The caller is named by SO_PEERPIDFD where the kernel has it (6.5), so
// its /proc entry is read while it is known to be the same process; on
// gVisor by its PID alone, while the caller waits for the answer.
func peerCheck(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	pidfd := -1
	raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = p
		}
	})
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if credErr != nil {
		return fmt.Errorf("the caller's credentials: %w", credErr)
	}
	if cred.Uid != 0 || cred.Pid <= 0 {
		return fmt.Errorf("the caller is uid %d, not root", cred.Uid)
	}
	if err := holdsAsMuch(fmt.Sprintf("/proc/%d", cred.Pid), "/proc/self"); err != nil {
		return err
	}
	if pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return errors.New("the caller ended before it was checked")
	}
	return nil
}

// holdsAsMuch reports why the process at proc (a /proc/PID) holds less
// than the one at self, or nil.
func holdsAsMuch(proc, self string) error {
	theirs, err := readStatus(proc)
	if err != nil {
		return err
	}
	ours, err := readStatus(self)
	if err != nil {
		return err
	}
	for _, id := range []string{"Uid", "Gid"} {
		if f := strings.Fields(theirs[id]); len(f) == 0 || strings.Trim(strings.Join(f, ""), "0") != "" {
			return fmt.Errorf("the caller's %s is %q, not root's", id, theirs[id])
		}
	}
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd"} {
		t, err1 := strconv.ParseUint(theirs[set], 16, 64)
		o, err2 := strconv.ParseUint(ours[set], 16, 64)
		if err1 != nil || err2 != nil || o&^t != 0 {
			return fmt.Errorf("the caller's %s %q lacks some of init's %q", set, theirs[set], ours[set])
		}
	}
	if t, o := atoi(theirs["Seccomp_filters"]), atoi(ours["Seccomp_filters"]); t > o {
		return fmt.Errorf("the caller is under %d seccomp filters, init %d", t, o)
	}
	for _, ns := range namespaces {
		t, err1 := os.Readlink(proc + "/ns/" + ns)
		o, err2 := os.Readlink(self + "/ns/" + ns)
		if err1 != nil || err2 != nil || t != o {
			return fmt.Errorf("the caller is not in init's %s namespace", ns)
		}
	}
	return nil
}

// readStatus reads proc's status file as a map of its fields.
func readStatus(proc string) (map[string]string, error) {
	f, err := os.Open(proc + "/status")
	if err != nil {
		return nil, fmt.Errorf("the caller's status: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
