package testkit

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is a process's CPU time, user and system (utime and stime in
// /proc/PID/stat), and that of the children it waited for (cutime and
// cstime); zero for a process that is gone.
func ProcessCPU(pid string) (self, children time.Duration) {
	st, _ := os.ReadFile("/proc/" + pid + "/stat")
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(st[i+1:])) // from field 3, state
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(n int) time.Duration {
		v, _ := strconv.ParseInt(f[n], 10, 64)
		return time.Duration(v) * time.Second / 100 // USER_HZ
	}
	return tick(11) + tick(12), tick(13) + tick(14)
}
