package oci

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/tied"
)

// The root filesystem: an overlayfs mounted on the host before the runtime
// starts, whose lowers are the Spec's Layers and whose upper is the
// Sandbox's own. Measured on kernel 6.18 (and why it is arranged so):
//
//   - Layers are unpacked or snapshotted owned by host uid 0..65535, shared
//     by every Sandbox and never written. Each lower is an idmapped mount
//     (open_tree(OPEN_TREE_CLONE) + mount_setattr(MOUNT_ATTR_IDMAP) with a
//     user namespace mapping 0 -> the Sandbox's base), so the Sandbox's root
//     sees them as its own without a chown per uid range.
//   - The upper cannot be idmapped as well: overlayfs does copy-up,
//     whiteouts and its work directory with the mounter's credentials (host
//     root), which an idmapped upper cannot represent; the mount then fails
//     to make work/work (EOVERFLOW) and falls back to read-only. So the upper
//     is a plain directory and a Sandbox's own writes are owned by its own
//     host uid range. Snapshot shifts them back to 0.. (snapshot.go), so a
//     snapshot is a layer like any other, usable by a Sandbox with another
//     range.
//   - Layers are passed to overlayfs as file descriptors ("lowerdir+" with
//     FSCONFIG_SET_FD, Linux 6.13+), so no idmapped mount ever appears in the
//     host's mount table. Older kernels get mountLowersByPath.
//
// The overlay is mounted with redirect_dir, index and metacopy off, so an
// upper holds whole files and plain whiteouts and stays usable as a lower
// anywhere.

// uidRange is the size of every Sandbox's uid and gid range.
const uidRange = 65536

// uidBase is the first host uid of slot 0's range; slot n's range starts at
// uidBase + n*uidRange. It sits far above the ranges /etc/subuid hands out.
const uidBase = 1 << 30

// Userns makes a user namespace mapping 0..65535 to base.. and returns
// a descriptor of it. The helper that made it is gone by then: the
// descriptor alone keeps the namespace.
func Userns(base uint32) (int, error) {
	pid, done, err := namespaceHelper(syscall.CLONE_NEWUSER, base)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	done()
	if err != nil {
		return -1, fmt.Errorf("open user namespace: %w", err)
	}
	return fd, nil
}

// namespaceHelper starts a helper in new namespaces (flags, a new user
// namespace among them) mapping 0..65535 to base.., and returns its pid;
// done ends it, once its namespaces are opened or bound.
func namespaceHelper(flags uintptr, base uint32) (pid int, done func(), err error) {
	cmd := exec.Command("/proc/self/exe", helperArg, helperUserns)
	cmd.Env = []string{}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: uidRange}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  flags,
		UidMappings: m,
		GidMappings: m,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := tied.Start(cmd); err != nil {
		stdin.Close()
		return 0, nil, fmt.Errorf("start user namespace helper: %w", err)
	}
	return cmd.Process.Pid, func() { stdin.Close(); cmd.Wait() }, nil
}

// usernsCache keeps one user namespace per uid base for the backend's
// life: making one costs a process, and a slot's base comes back at its
// Sandbox's next Start, or with the next Sandbox on the slot.
type usernsCache struct {
	mu  sync.Mutex
	fds map[uint32]int
}

func (c *usernsCache) get(base uint32) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[base]; ok {
		return fd, nil
	}
	fd, err := Userns(base)
	if err != nil {
		return -1, err
	}
	if c.fds == nil {
		c.fds = map[uint32]int{}
	}
	c.fds[base] = fd
	return fd, nil
}

// idmappedClone returns a detached, idmapped copy of the mount at path.
func idmappedClone(path string, usernsFD int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", path, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY, Userns_fd: uint64(usernsFD)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idmap %s: %w", path, err)
	}
	return fd, nil
}

// overlayOptions are set on every root filesystem (see above).
var overlayOptions = [][2]string{{"redirect_dir", "off"}, {"index", "off"}, {"metacopy", "off"}}

// mountRootfs mounts the root filesystem at target, its layers idmapped
// through userns. scratch is a directory of the Sandbox's own for the
// older kernels' path (mountLowersByPath).
func mountRootfs(layers []string, upper, work, target, scratch string, userns int) error {
	err := mountLowersByFD(layers, upper, work, target, userns)
	if errors.Is(err, errLowerFDUnsupported) {
		err = mountLowersByPath(layers, upper, work, target, scratch, userns)
	}
	return err
}

var errLowerFDUnsupported = errors.New(`this kernel cannot take overlayfs layers as file descriptors ("lowerdir+")`)

func mountLowersByFD(layers []string, upper, work, target string, userns int) error {
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fs)
	// A detached mount lives as long as its file descriptor: each stays
	// open until the overlay has cloned it, at create.
	for _, l := range layers {
		fd, err := idmappedClone(l, userns)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.FsconfigSetFd(fs, "lowerdir+", fd); err != nil {
			return errLowerFDUnsupported
		}
	}
	set := append([][2]string{{"upperdir", upper}, {"workdir", work}}, overlayOptions...)
	for _, kv := range set {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return fmt.Errorf("overlay option %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("create overlay: %w%s", err, fsLog(fs))
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOSUID)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

// fsLog reads the kernel's messages about a failed fsconfig.
func fsLog(fs int) string {
	var msgs []string
	buf := make([]byte, 512)
	for {
		n, err := unix.Read(fs, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

// mountLowersByPath is for kernels before 6.13: each idmapped lower is
// attached under scratch, named in lowerdir, and detached again once the
// overlay holds it, as containers/storage does.
func mountLowersByPath(layers []string, upper, work, target, scratch string, userns int) error {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return err
	}
	var paths []string
	defer func() {
		for _, p := range paths {
			unix.Unmount(p, unix.MNT_DETACH)
			os.Remove(p)
		}
	}()
	for i, l := range layers {
		fd, err := idmappedClone(l, userns)
		if err != nil {
			return err
		}
		p := filepath.Join(scratch, strconv.Itoa(i))
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			unix.Close(fd)
			return err
		}
		err = unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("attach idmapped layer %s: %w", l, err)
		}
		paths = append(paths, p)
	}
	opts := "lowerdir=" + strings.Join(paths, ":") + ",upperdir=" + upper + ",workdir=" + work
	for _, kv := range overlayOptions {
		opts += "," + kv[0] + "=" + kv[1]
	}
	// Nothing setuid in it means anything on the host.
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

// unmountRootfs detaches the root filesystem and removes its mount point;
// not mounted is fine.
func unmountRootfs(target string) error {
	err := unix.Unmount(target, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
