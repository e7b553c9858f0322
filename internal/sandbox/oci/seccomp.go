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
// A Sandbox therefore cannot run bubblewrap, nested containers or Docker;
// the vm backend is the one for those.
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	denied := []string{
		"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
		"delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
		"get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
		"io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load",
		"keyctl", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
		"name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
		"perf_event_open", "pivot_root", "quotactl", "quotactl_fd", "reboot",
		"request_key", "setns", "settimeofday", "stime", "swapoff", "swapon",
		"syslog", "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat",
		"vm86", "vm86old", "_sysctl", "sysfs",
	}
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArches(),
		Syscalls: []specs.LinuxSyscall{
			{Names: denied, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
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
