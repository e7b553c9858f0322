package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// A gVisor Sandbox's idmapped binds are made here, on the host, before
// runsc runs, and runsc is given plain binds of them. runsc makes an
// idmapped mount by starting a process of its own binary in a new user
// namespace for each one; measured (BenchmarkCreateStartExecCPU's floor,
// one mount at a time added to a bare bundle), each cost about 28 CPU-ms
// of a start, and a Session's Sandbox has ten or more (the /etc files,
// its Disks, Binds and DiskBinds). Here they share the slot's cached user
// namespace (usernsCache), as its root filesystem's layers do. crun makes
// its own, at no such cost.
//
// They are attached below the slot's private directory (makeRootfsDir),
// beside the root filesystem's mount point, never inside a Sandbox's
// state directory: nothing removes a directory there recursively, and
// removeRootfs detaches them before it removes their mount points.

// bindsDir is where slot's idmapped binds are attached while it runs.
func (b *OCI) bindsDir(slot int) string {
	return filepath.Join(filepath.Dir(b.rootfsDir(slot)), "binds")
}

// attachIdmapped replaces each "idmap" bind of spec by a plain bind of an
// idmapped copy of its source, attached in dir, mapped through userns.
func attachIdmapped(spec *specs.Spec, dir string, userns int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	for i, m := range spec.Mounts {
		j := slices.Index(m.Options, "idmap")
		if j < 0 {
			continue
		}
		at := filepath.Join(dir, strconv.Itoa(i))
		if err := attachIdmappedClone(m, at, userns); err != nil {
			return fmt.Errorf("idmap %s for %s: %w", m.Source, m.Destination, err)
		}
		spec.Mounts[i].Source = at
		spec.Mounts[i].Options = slices.Delete(slices.Clone(m.Options), j, j+1)
	}
	return nil
}

// attachIdmappedClone clones the mount at m.Source (with what is mounted
// below it, for an rbind, as runsc does), idmaps its top and attaches it
// at the new mount point at.
func attachIdmappedClone(m specs.Mount, at string, userns int) error {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if slices.Contains(m.Options, "rbind") {
		flags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, flags)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if slices.Contains(m.Options, "ro") {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := detachBind(at); err != nil { // what a crash left
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(at, 0o700)
	} else {
		var f *os.File
		if f, err = os.OpenFile(at, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		os.Remove(at)
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// detachBinds detaches every bind in dir and removes the mount points and
// dir; none there is fine.
func detachBinds(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, detachBind(filepath.Join(dir, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// detachBind detaches what is mounted at path, each layer of it, and
// removes the mount point; neither there is fine. It never removes
// anything but the empty mount point (os.Remove, never RemoveAll).
func detachBind(path string) error {
	for {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
