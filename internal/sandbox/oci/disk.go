package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A Sandbox's disk limit. With one (record.DiskMiB > 0) everything the
// Sandbox writes, its root filesystem's upper layer and its Disks
// together, lives on an ext4 filesystem of that size in a sparse image
// file of its own, <sandbox>/disk.img, loop-mounted at <sandbox>/own: a
// write past it fails with ENOSPC inside the Sandbox, on crun and on
// gVisor alike (the gofer gets the host's ENOSPC), and the host's
// filesystem only ever holds what the Sandbox really wrote (sparse, and
// mounted with discard, so deleted files give their blocks back).
//
// The image is mounted while the Sandbox runs, and for the length of an
// operation that reads or writes its files while it is stopped (a Create
// taking kept Disks in, Snapshot, RemoveKeepingDisks, PruneDisk), under
// the Sandbox's lock; a
// stopped Sandbox holds no loop device and no mount. The loop device is
// set to clear itself on its last close (LO_FLAGS_AUTOCLEAR), so an
// unmount, or a crash before the mount, frees it; reconcile unmounts what
// a crash left and clears any loop device still backed by an image here.
//
// One image per Sandbox, not one per Disk, makes the limit the Sandbox's
// whole: what it costs is that RemoveKeepingDisks copies each Disk out of
// the image, and Create copies a kept one in (docs/performance.md). A
// Disk.Apart has an image of its own, of the same size, mounted beside
// (<sandbox>/disk-<name>.img at own-<name>, the Disk in its disk/): the
// Runner's for Claude Code's state, whose transcript must go on being
// written when the Session has filled the rest.

// diskImage and diskMount are a limited Sandbox's image and its mount point.
func (d sandboxDir) diskImage() string { return d.path("disk.img") }
func (d sandboxDir) diskMount() string { return d.path("own") }

// own is the directory holding the Sandbox's upper, work and Disks: the
// image's mount point with a disk limit, the Sandbox's directory without.
func (d sandboxDir) own(rec record) sandboxDir {
	if rec.DiskMiB > 0 {
		return sandboxDir(d.diskMount())
	}
	return d
}

// image is one of a limited Sandbox's disk images and its mount point,
// both right in the Sandbox's directory.
type image struct{ file, mount string }

// tree is where Create makes the image's first directories, for
// mkfs.ext4 to copy in.
func (im image) tree() string { return im.mount + "-tree" }

// images are a Sandbox's disk images: the one its upper, work and Disks
// share, then one for each Disk.Apart; none without a limit.
func (d sandboxDir) images(rec record) []image {
	if rec.DiskMiB == 0 {
		return nil
	}
	out := []image{{d.diskImage(), d.diskMount()}}
	for _, dk := range rec.Spec.Disks {
		if dk.Apart {
			out = append(out, image{d.path("disk-" + dk.Name + ".img"), d.path("own-" + dk.Name)})
		}
	}
	return out
}

// diskDir is where Disk name's files are on the host: under own, or, for
// an Apart Disk with a limit, in its own image (not at its root, which
// has ext4's lost+found).
func (d sandboxDir) diskDir(rec record, name string) string {
	for _, dk := range rec.Spec.Disks {
		if dk.Name == name && dk.Apart && rec.DiskMiB > 0 {
			return d.path("own-"+name, "disk")
		}
	}
	return d.own(rec).disk(name)
}

// mountImages mounts each image not mounted yet.
func mountImages(images []image) error {
	for _, im := range images {
		if err := mountDiskImage(im.file, im.mount); err != nil {
			return err
		}
	}
	return nil
}

// unmountImages unmounts each image that is mounted.
func unmountImages(images []image) error {
	var errs []error
	for _, im := range images {
		if err := unmountDiskImage(im.mount); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func anyMounted(images []image) bool {
	return slices.ContainsFunc(images, func(im image) bool { return isMountPoint(im.mount) })
}

// diskEnforcer says how this host enforces a disk limit, or why it cannot.
func diskEnforcer() (how string, err error) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "", errors.New("mkfs.ext4 is not installed (apt-get install e2fsprogs)")
	}
	fd, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("no loop devices (/dev/loop-control: %v)", err)
	}
	unix.Close(fd)
	return "a sized ext4 image per Sandbox, loop-mounted: its own writes and its Disks together", nil
}

// makeDiskImage makes a sparse image of mib MiB at path with an ext4 on
// it holding a copy of the tree at dir (owners and modes kept), so that
// Create need not mount it. Lazy inode table and journal initialisation
// keep mkfs from writing the whole of it; -m 0: no blocks kept for a root
// that is the Sandbox's own.
func makeDiskImage(ctx context.Context, path string, mib int, dir string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(mib) << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", "-d", dir, path)
	cmd.Env = runtimeEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w: %s", path, err, tail(out, 400))
	}
	return nil
}

// makeDiskImages makes each image from its tree, at once (mkfs.ext4 spends
// its time in system calls, not on a core), then removes the trees.
func makeDiskImages(ctx context.Context, images []image, mib int) error {
	errs := make([]error, len(images))
	var wg sync.WaitGroup
	for i, im := range images {
		wg.Go(func() { errs[i] = makeDiskImage(ctx, im.file, mib, im.tree()) })
	}
	wg.Wait()
	for _, im := range images {
		errs = append(errs, removeTree(im.tree()))
	}
	return errors.Join(errs...)
}

// mountDiskImage attaches img to a free loop device and mounts its ext4 at
// target (made if missing). Mounted already is fine.
func mountDiskImage(img, target string) error {
	if isMountPoint(target) {
		return nil
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return err
	}
	loop, err := attachLoop(img)
	if err != nil {
		return err
	}
	// The mount holds the device now: closing it leaves it attached until
	// the unmount, when it clears itself.
	defer loop.Close()
	if err := unix.Mount(loop.Name(), target, "ext4", unix.MS_NODEV|unix.MS_NOSUID, "discard"); err != nil {
		return fmt.Errorf("mount the disk image %s at %s: %w", img, target, err)
	}
	return nil
}

// attachLoop sets a free loop device over img, clearing itself on its
// last close. Another process may take the free device between asking
// and setting it (EBUSY): then it asks again.
func attachLoop(img string) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	backing, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer backing.Close()
	for range 10 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd()), Size: 4096} // Size: the block size, mkfs.ext4 -b's
		// Direct I/O keeps the image's pages out of the host's page cache
		// (the ext4 above caches them already).
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		copy(cfg.Info.File_name[:], img)
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach %s to a loop device: %w", img, err)
		}
	}
	return nil, fmt.Errorf("attach %s to a loop device: every free one was taken first", img)
}

// unmountDiskImage unmounts a Sandbox's image, if mounted, and removes the
// mount point; its loop device clears itself.
func unmountDiskImage(target string) error {
	if isMountPoint(target) {
		err := unix.Unmount(target, 0)
		if errors.Is(err, unix.EBUSY) {
			// Something of the Sandbox's still holds a file (a runtime
			// process not yet reaped): the device goes once it lets go.
			err = unix.Unmount(target, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount the disk image at %s: %w", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// withDisk runs fn with a stopped Sandbox's images mounted, unmounting
// them after; without a disk limit it just runs fn.
func withDisk(d sandboxDir, rec record, fn func() error) error {
	images := d.images(rec)
	if err := mountImages(images); err != nil {
		unmountImages(images)
		return err
	}
	err := fn()
	if uerr := unmountImages(images); err == nil {
		err = uerr
	}
	return err
}

// diskUse reports how many MiB of a mounted image are used, and whether
// it is full: less than 1 MiB left, as after a write ext4 refused for
// want of space.
func diskUse(target string) (used int, full bool) {
	var st unix.Statfs_t
	if !isMountPoint(target) || unix.Statfs(target, &st) != nil {
		return 0, false
	}
	bs := uint64(st.Bsize)
	return int((st.Blocks - st.Bfree) * bs >> 20), st.Bavail*bs < 1<<20
}

// loopsUnder maps each loop device backed by a file under dir to that
// file: one whose image is not mounted is what a crash left attached past
// its autoclear.
func loopsUnder(dir string) map[string]string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if p := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)"); strings.HasPrefix(p, dir+"/") {
			out["/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f)))] = p
		}
	}
	return out
}

// detachLoop clears a loop device; one still mounted is busy and stays.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
}
