package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRoot is where the task's root is built. Any folder the host has
// will do: the tmpfs goes over it in this mount namespace alone.
const newRoot = "/tmp"

// hostLinks are the top-level names that are links into /usr on a
// merged-/usr host, or folders of their own on an older one.
var hostLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// devices are the host's device nodes a task may use.
var devices = []string{"null", "zero", "urandom"}

// buildRoot makes the task's root and moves into it: run in the task's
// new mount namespace, with the folder's mount at fd 3.
func buildRoot(lim Limits) error {
	// Nothing mounted here reaches the host, nor anything of the host's here.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0755"); err != nil {
		return fmt.Errorf("mount the root: %w", err)
	}
	at := func(p string) string { return filepath.Join(newRoot, p) }
	if err := bindReadOnly("/usr", at("usr"), true); err != nil {
		return err
	}
	for _, name := range hostLinks {
		st, err := os.Lstat("/" + name)
		switch {
		case err != nil:
			continue
		case st.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink("/" + name)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, at(name)); err != nil {
				return err
			}
		case st.IsDir():
			if err := bindReadOnly("/"+name, at(name), true); err != nil {
				return err
			}
		}
	}
	// ld.so finds libraries without its cache, only slower.
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		if err := bindReadOnly("/etc/ld.so.cache", at("etc/ld.so.cache"), false); err != nil {
			return err
		}
	}
	for _, d := range devices {
		if err := bindReadOnly("/dev/"+d, at("dev/"+d), false); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(at(Dir), 0o755); err != nil {
		return err
	}
	if err := unix.MoveMount(3, "", unix.AT_FDCWD, at(Dir), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount the folder at %s: %w", Dir, err)
	}
	if err := os.Mkdir(at("tmp"), 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", at("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("size=%d,mode=1777", lim.Scratch)); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if err := os.Mkdir(at(".old"), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(newRoot, at(".old")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("let go of the host's root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return err
	}
	// The root's own tmpfs, read-only now that it is built; /tmp stays
	// the one place the task writes.
	return unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// execSelf execs this binary from fd 4 (execveat with AT_EMPTY_PATH): no
// path in the task's root leads to it. Neither the binary's descriptor
// nor the folder's mount stays open in the task.
func execSelf(argv, env []string) error {
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, 4, uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return errno
}

// bindReadOnly binds the host's src at dst (made as a folder or an empty
// file), read-only and without suid; dir says which, rec whether mounts
// beneath src come too.
func bindReadOnly(src, dst string, rec bool) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.WriteFile(dst, nil, 0o644)
		}
	}
	if err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND)
	setattr := uint(0)
	if rec {
		flags |= unix.MS_REC
		setattr = unix.AT_RECURSIVE
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, setattr, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// The securebits (linux/securebits.h) that keep uid 0 from meaning any
// capability, locked so the task can't turn them back.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// dropPrivileges sets the limits and drops every capability from the
// calling thread for good: the bounding set emptied, securebits locked,
// ambient and the thread's own sets cleared, no_new_privs.
func dropPrivileges(lim Limits) error {
	for _, l := range []struct {
		res int
		max uint64
	}{
		{unix.RLIMIT_AS, lim.Memory},
		{unix.RLIMIT_CPU, uint64(lim.CPU.Seconds())},
		{unix.RLIMIT_FSIZE, lim.Scratch},
		{unix.RLIMIT_NPROC, lim.Procs},
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_NOFILE, 1024},
	} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			return fmt.Errorf("limit %d: %w", l.res, err)
		}
	}
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err == unix.EINVAL {
			break // past the kernel's last capability
		} else if err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	var none [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &none[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}
