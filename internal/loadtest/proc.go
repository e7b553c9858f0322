package loadtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// usage is a process's CPU time and resident memory at one moment.
type usage struct {
	cpu time.Duration
	rss int64
}

// clockTick is the kernel's USER_HZ, which /proc/PID/stat counts in: 100
// on every Linux architecture Go builds for.
const clockTick = 10 * time.Millisecond

// procUsage reads pid's CPU time (user and system) and resident set.
func procUsage(pid int) (usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 22 {
		return usage{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	if f[0] == "Z" { // a Hub killed, not yet reaped: its figures are gone
		return usage{}, fmt.Errorf("process %d has exited", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	return usage{cpu: time.Duration(ut+st) * clockTick, rss: pages * int64(os.Getpagesize())}, nil
}

// listenerPID finds the process on this machine listening on TCP port:
// the socket's inode from /proc/net/tcp (and tcp6), then the process
// holding it. 0 when none is found (another user's, without root).
func listenerPID(port int) int {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			// local_address is ADDR:PORT in hex; st 0A is LISTEN.
			if len(fl) < 10 || fl[3] != "0A" {
				continue
			}
			if i := strings.LastIndexByte(fl[1], ':'); i > 0 {
				if p, err := strconv.ParseInt(fl[1][i+1:], 16, 32); err == nil && int(p) == port {
					inodes["socket:["+fl[9]+"]"] = true
				}
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && inodes[l] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}

// SQLiteSize is a SQLite store's size: its file and its write-ahead log.
func SQLiteSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	n := st.Size()
	if wal, err := os.Stat(path + "-wal"); err == nil {
		n += wal.Size()
	}
	return n, nil
}
