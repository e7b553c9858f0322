// Package confine runs the Runner's work over data a Sandbox wrote with no
// more privilege than the Sandbox has. Everything in a Workspace is the
// Sandbox's to write: a git config naming a filter, a link into another
// Session's Workspace, a FIFO, a line of 64 MiB. A tool the Runner runs
// over it as root acts on all of that as root, so none does: the work runs
// as a task in a process of its own that
//
//   - is in new user, mount, PID, network, IPC, UTS and cgroup namespaces,
//     as root of its user namespace only (host uids ReaderUIDBase.. are
//     the readers' own, used by no Sandbox and no host user), with every
//     capability dropped, no_new_privs set and securebits locked, so
//     neither exec nor anything else gives one back;
//   - sees a root of its own: the host's /usr (and the /bin, /lib links
//     into it) read-only, /dev/null, /dev/zero and /dev/urandom, a small
//     /tmp, the kndl binary at /kndl, and the one folder it reads, read-only,
//     no exec, at Dir; no other Workspace, no Runner state, no /proc;
//   - has no network but a loopback that is down;
//   - is bounded in memory, CPU time, file size and processes (Limits), and
//     killed with everything it started when its context ends.
//
// The folder is shown through an idmapped mount, as the Sandbox sees it:
// what the Sandbox's root wrote belongs to the task's root, so it reads
// what the Sandbox could read, and nothing the Sandbox could not.
//
// The Runner imports this package; the kndl binary and every test binary
// that runs a Runner call RunHelper (through runner.RunHelper) before
// anything else, since a task is the same binary run again.
package confine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// Dir is where a task sees the folder it reads.
const Dir = "/workspace"

// ReaderUIDBase is the first host uid (and gid) of the confined tasks'
// range of 65536: just below the first Sandbox slot's (oci's uidBase,
// 1<<30), far above the ranges /etc/subuid hands out.
const ReaderUIDBase = 1<<30 - idRange

const idRange = 65536

// helperArg is the hidden first argument that makes the binary one of
// this package's stages.
const helperArg = "__kndl-confine"

// The stages a confined task goes through, each the same binary.
const (
	// stageEnter starts in the new namespaces with their capabilities:
	// it builds the root, drops every privilege and execs stageTask.
	stageEnter = "enter"
	// stageTask runs the task, with no privilege left.
	stageTask = "task"
)

// Limits bound one task. A task past one is killed (memory, CPU) or
// fails its write (file size); the Runner's context bounds its time.
type Limits struct {
	Memory  uint64        // address space, RLIMIT_AS
	CPU     time.Duration // CPU time, RLIMIT_CPU
	Scratch uint64        // the /tmp tmpfs, and RLIMIT_FSIZE
	Procs   uint64        // processes of the readers' uid, RLIMIT_NPROC
}

// DefaultLimits fit git over a large Workspace: its pack windows are
// held under Memory by the task's own settings.
var DefaultLimits = Limits{Memory: 2 << 30, CPU: time.Minute, Scratch: 512 << 20, Procs: 256}

// Tasks are what a confined process may run, by name. A task reads the
// folder at Dir, takes its arguments, writes its answer to stdout and
// returns its exit code.
type Tasks map[string]func(args []string) int

// Command returns the command that runs task with args, confined, over
// the host folder dir. The caller sets its output and runs it, then calls
// done (which frees the folder's mount) whether or not it ran. It fails if
// this process can't make namespaces and idmapped mounts (the Runner runs
// as root on Linux 5.12 or later).
func Command(ctx context.Context, dir string, lim Limits, task string, args ...string) (cmd *exec.Cmd, done func(), err error) {
	userns, err := readersUserns()
	if err != nil {
		return nil, nil, err
	}
	mnt, err := readOnlyView(dir, userns)
	if err != nil {
		return nil, nil, err
	}
	// The task is this binary again, exec'd from this descriptor once the
	// host's files are out of its sight.
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		mnt.Close()
		return nil, nil, fmt.Errorf("confine: open this binary: %w", err)
	}
	cmd = exec.CommandContext(ctx, "/proc/self/exe", append([]string{helperArg, stageEnter,
		fmt.Sprint(lim.Memory), fmt.Sprint(int64(lim.CPU / time.Second)), fmt.Sprint(lim.Scratch), fmt.Sprint(lim.Procs), task}, args...)...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{mnt, self} // fds 3 and 4 in the task
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: ReaderUIDBase, Size: idRange}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: m,
		GidMappings: m,
		// Root of the new namespace, host uid ReaderUIDBase: without it
		// the task would stay host root, unmapped there.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:  syscall.SIGKILL,
		Setsid:     true,
	}
	// The task is PID 1 of its namespace: killing it ends all it started,
	// so nothing holds its pipes open past this.
	cmd.WaitDelay = 5 * time.Second
	return cmd, func() { mnt.Close(); self.Close() }, nil
}

// readOnlyView is a detached mount of dir alone (no mount beneath it),
// read-only, without exec, suid or devices, its owners mapped as the
// Sandbox's are: on-disk 0.. is the task's root.
func readOnlyView(dir string, userns int) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("confine: open %s: %w", dir, err)
	}
	attr := &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("confine: idmap %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// The readers' user namespace, made once for the process's life (by the
// sandbox backend's helper, which must be registered: runner.RunHelper):
// each costs a process to make, and one serves every mount.
var readers struct {
	sync.Mutex
	fd int
}

func readersUserns() (int, error) {
	readers.Lock()
	defer readers.Unlock()
	if readers.fd > 0 {
		return readers.fd, nil
	}
	fd, err := oci.Userns(ReaderUIDBase)
	if err != nil {
		return -1, fmt.Errorf("confine: make the readers' user namespace (the Runner runs as root): %w", err)
	}
	readers.fd = fd
	return fd, nil
}

// RunHelper runs the stage args (os.Args) names, if it names one, and
// reports its exit code; tasks are the tasks this binary can run.
func RunHelper(args []string, tasks Tasks) (code int, ok bool) {
	if len(args) < 3 || args[1] != helperArg {
		return 0, false
	}
	switch args[2] {
	case stageEnter:
		return enter(args[3:], tasks), true
	case stageTask:
		if len(args) < 4 || tasks[args[3]] == nil {
			fmt.Fprintf(os.Stderr, "kndl: no confined task %q\n", args[3:])
			return 2, true
		}
		return tasks[args[3]](args[4:]), true
	}
	fmt.Fprintf(os.Stderr, "kndl: unknown confine stage %q\n", args[2])
	return 2, true
}

// enter builds the task's root, drops every privilege and execs the task.
// args are the limits, the task's name and its arguments.
func enter(args []string, tasks Tasks) int {
	var lim Limits
	var cpu int64
	if len(args) < 5 {
		fmt.Fprintln(os.Stderr, "kndl: confine: too few arguments")
		return 2
	}
	if _, err := fmt.Sscan(args[0]+" "+args[1]+" "+args[2]+" "+args[3], &lim.Memory, &cpu, &lim.Scratch, &lim.Procs); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: confine: limits: %v\n", err)
		return 2
	}
	lim.CPU = time.Duration(cpu) * time.Second
	task := args[4]
	if tasks[task] == nil {
		fmt.Fprintf(os.Stderr, "kndl: no confined task %q\n", task)
		return 2
	}
	// Securebits, capabilities and no_new_privs are the thread's; the
	// exec below takes this thread's.
	runtime.LockOSThread()
	if err := buildRoot(lim); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: confine: %v\n", err)
		return 1
	}
	if err := dropPrivileges(lim); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: confine: %v\n", err)
		return 1
	}
	argv := append([]string{"kndl", helperArg, stageTask, task}, args[5:]...)
	err := execSelf(argv, []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8"})
	fmt.Fprintf(os.Stderr, "kndl: confine: exec the task: %v\n", err)
	return 1
}
