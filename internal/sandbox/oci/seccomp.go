package oci

import (
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// seccompProfile is the filter on every process of a Sandbox. crun has no
// built-in default, so the backend always passes this one: it allows what
// a Sandbox's root is expected to do and refuses, with EPERM, the kernel
// interfaces that sit outside a user namespace's reach or have been the way
// out of containers: kernel modules and kexec, BPF, perf, keyrings,
// io_uring, userfaultfd, clock and swap settings, and making new namespaces
// or mounts (a nested user namespace would hand the Sandbox CAP_NET_ADMIN
// over a network namespace of its own, and with it nf_tables). clone3 is
// answered ENOSYS, since its flags cannot be inspected, so libc falls back
// to clone, whose namespace flags are refused. This is the deny side of
// Docker's default profile; anything not named is allowed.
//
// A Sandbox therefore cannot run bubblewrap or nested containers.
//
// A Docker Sandbox's profile (docker) lets namespaces and mounts through,
// for dockerd, containerd and runc: the Sandbox's root, holding
// dockerCapabilities over its own user namespace, makes its containers'
// namespaces, mounts their overlays and sets up their network. The rest
// stays refused; keyrings answer ENOSYS, which runc takes for "none here".
func seccompProfile(docker bool) *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	denied := []string{
		"acct", "bpf", "clock_adjtime", "clock_settime", "create_module",
		"delete_module", "finit_module", "get_kernel_syms", "init_module",
		"io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl",
		"kcmp", "kexec_file_load", "kexec_load", "lookup_dcookie",
		"name_to_handle_at", "nfsservctl", "open_by_handle_at",
		"perf_event_open", "quotactl", "quotactl_fd", "reboot",
		"settimeofday", "stime", "swapoff", "swapon",
		"syslog", "uselib", "userfaultfd", "ustat",
		"vm86", "vm86old", "_sysctl", "sysfs",
	}
	// Keyrings are refused either way; a Docker Sandbox's with ENOSYS,
	// which runc takes as "no keyrings here" where EPERM fails its start.
	keyrings := []string{"add_key", "keyctl", "request_key"}
	unsupported := []string{"clone3"}
	if docker {
		unsupported = append(unsupported, keyrings...)
	} else {
		denied = append(denied, keyrings...)
		denied = append(denied, namespacesAndMounts...)
	}
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArches(),
		Syscalls: []specs.LinuxSyscall{
			{Names: denied, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: unsupported, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	if docker {
		return p
	}
	for _, flag := range []uint64{
		unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
	} {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	return p
}

// namespacesAndMounts are the calls that make namespaces or mounts, refused
// outside a Docker Sandbox.
var namespacesAndMounts = []string{
	"fsconfig", "fsmount", "fsopen", "fspick", "mount", "mount_setattr", "move_mount",
	"open_tree", "pivot_root", "setns", "umount", "umount2", "unshare",
}

// seccompArches lists every ABI the host's CPU runs, so a syscall made
// through a compat ABI (int 0x80 on amd64) meets the same rules.
func seccompArches() []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	}
	return nil
}
