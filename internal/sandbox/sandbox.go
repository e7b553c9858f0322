// Package sandbox is the seam between a Runner and the isolation technology
// that runs Sandboxes on its host. A Backend makes, starts, execs in, stops,
// snapshots and removes Sandboxes; implementations live in sub-packages
// (oci, with crun or gVisor's runsc; later vm) and all pass the conformance
// suite in sandboxtest.
//
// Only the Runner (internal/runner, internal/build, internal/dockerd)
// imports this package.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
)

// Errors a Backend returns; wrap them with context, test with errors.Is.
var (
	// ErrNotFound: no Sandbox with that id.
	ErrNotFound = errors.New("sandbox not found")
	// ErrExists: Create with an id already in use.
	ErrExists = errors.New("sandbox already exists")
	// ErrNotRunning: Exec or Snapshot-while-running style mismatches of state.
	ErrNotRunning = errors.New("sandbox not running")
	// ErrRunning: Snapshot or Remove of a Sandbox that must be stopped first.
	ErrRunning = errors.New("sandbox running")
	// ErrNotSupported: the operation is optional and this backend lacks it.
	ErrNotSupported = errors.New("not supported by this sandbox backend")
)

// RelayHost is the fixed name under which every Sandbox reaches its Runner's
// mod relay.
const RelayHost = "host.kndl.internal"

// ForgeAPIHosts are the names gh in the Sandbox calls GitHub by, which
// its hosts file also gives the relay's address: gh 2.23 speaks plain
// HTTP only to github.localhost (GH_HOST) and calls its API at
// http://api.github.localhost/ on port 80, which the backend sends to
// the relay's port, where the git relay serves it (internal/gitrelay's
// GHHost and APIHost).
var ForgeAPIHosts = []string{"github.localhost", "api.github.localhost"}

// ForgeAPIPort is the port gh calls ForgeAPIHosts on.
const ForgeAPIPort = 80

// Weigher is a backend that can set a running Sandbox's CPU weight: its
// share of CPU time against the others' when they contend (cgroup v2's
// cpu.weight, 1 to 10000, 100 each by default), which limits nothing while
// the CPU is free. It returns ErrNotSupported where the host can't, and
// ErrNotRunning for a Sandbox not running; a new start has the default.
type Weigher interface {
	SetCPUWeight(ctx context.Context, id string, weight int) error
}

// Backend runs Sandboxes on one host. Every method takes ctx first; ids are
// chosen by the caller ([a-z0-9-], at most 40 characters).
//
// Restart recovery is part of the contract: a Backend keeps its own state on
// disk, so a new Backend over the same state directory sees every Sandbox the
// old one made (List), their processes still running, and has torn down
// whatever a crash left half made.
type Backend interface {
	// Name is the backend's name, such as "crun" or "gvisor" (both the oci
	// package's), shown on the Runners page and by kndl runner ls.
	Name() string
	// Host reports what this host can and cannot enforce.
	Host() HostInfo

	// Create makes a stopped Sandbox from spec. Returns ErrExists if the id
	// is taken. A Create that fails leaves nothing behind.
	Create(ctx context.Context, spec Spec) error
	// Start boots a created or stopped Sandbox.
	Start(ctx context.Context, id string) error
	// Exec runs a process in a running Sandbox. Returns ErrNotRunning if it
	// is not running.
	Exec(ctx context.Context, id string, cmd Cmd) (Process, error)
	// Stop kills every process in the Sandbox and keeps all of its disks, so
	// Start boots it again with the same state. Stopping a stopped Sandbox
	// is not an error.
	Stop(ctx context.Context, id string) error
	// Snapshot saves a stopped Sandbox's own writes (its root filesystem's
	// upper layer, not its Disks or Binds) as a read-only layer at dst, a
	// path that must not exist yet. The layer can then be listed in another
	// Spec's Layers. Returns ErrRunning if the Sandbox is running.
	Snapshot(ctx context.Context, id string, dst string) error
	// Remove stops the Sandbox if needed and deletes it with its disks and
	// everything it set up on the host. Returns ErrNotFound for an unknown id.
	Remove(ctx context.Context, id string) error
	// RemoveKeepingDisks is Remove, except that each of the Sandbox's Disks
	// is first moved to dir/<its name>, in the backend's own form (a
	// directory for oci; a VM's would be its image file), for a later
	// Create to take back through Disk.From. dir, an absolute host path, is
	// made if missing. A Disk already at dir/<name> while the Sandbox no
	// longer has it is one an earlier call moved before it was cut short,
	// so a repeated call finishes the job; one at dir/<name> while the
	// Sandbox still has its own is an errdefs.ErrConflict. Returns
	// ErrNotFound for an unknown id.
	RemoveKeepingDisks(ctx context.Context, id, dir string) error
	// SetDiskBinds replaces the Spec's DiskBinds of a created or stopped
	// Sandbox, for its next Start and those after. Returns ErrRunning if it
	// runs, ErrNotFound for an unknown id, and an errdefs.ErrInvalid for a
	// bind Create would refuse.
	SetDiskBinds(ctx context.Context, id string, binds []DiskBind) error
	// PruneDisk deletes each entry at the top of a created or stopped
	// Sandbox's Disk whose name keep refuses, with everything under it,
	// and says what went and how much it held. Returns ErrRunning if it
	// runs, ErrNotFound for an unknown id or a Disk it does not have.
	PruneDisk(ctx context.Context, id, disk string, keep func(name string) bool) ([]Pruned, error)
	// SetEgress sets the Spec's RestrictEgress of a created or stopped
	// Sandbox, for its next Start and those after. Returns ErrRunning if
	// it runs, ErrNotFound for an unknown id.
	SetEgress(ctx context.Context, id string, restrict bool) error

	// Status reports one Sandbox. Returns ErrNotFound for an unknown id.
	Status(ctx context.Context, id string) (Status, error)
	// List reports every Sandbox this backend knows, running or not.
	List(ctx context.Context) ([]Status, error)
}

// DiskLender is a Backend that lends a stopped Sandbox's Disks to be
// read in place, as a fork copies them (optional: a Runner whose backend
// lacks it forks no Session).
type DiskLender interface {
	// WithDisks calls fn with the host directory of each Disk of a
	// stopped Sandbox, by name, holding the Sandbox so that no Start,
	// prune or Remove comes between. fn only reads them. Returns
	// ErrRunning if it runs, ErrNotFound for an unknown id.
	WithDisks(ctx context.Context, id string, fn func(disks map[string]string) error) error
}

// Spec describes a Sandbox to Create.
type Spec struct {
	ID string
	// Layers are the read-only layers of the root filesystem, topmost
	// first: Build snapshots, then the image's base. They are never written.
	Layers []string
	// Disks are the Sandbox's own persistent directories, created empty
	// (or taken back, see Disk.From), kept by Stop, deleted by Remove and
	// moved out by RemoveKeepingDisks.
	Disks []Disk
	// Binds are host directories mounted into the Sandbox.
	Binds []Bind
	// DiskBinds mount subdirectories of its Disks elsewhere in the
	// Sandbox, after its Binds, so one may sit inside a Bind. They are set
	// again before a boot (SetDiskBinds) where they follow what is in a
	// Bind, such as a Workspace's dependency folders.
	DiskBinds []DiskBind
	// Tmpfs are memory-only mounts, gone at Stop.
	Tmpfs []Tmpfs
	// Resources are the limits asked for; the backend caps them.
	Resources Resources
	// Hostname inside the Sandbox; defaults to the id.
	Hostname string
	// Docker relaxes the Sandbox's profile so that dockerd runs inside it,
	// its containers nested in the Sandbox's own namespaces. A backend that
	// cannot do that refuses the Create with ErrNotSupported, saying why.
	Docker bool
	// RestrictEgress sends each TCP connection the Sandbox makes (but the
	// relay's) to the Runner's egress proxy (HostInfo.EgressProxy) and
	// each DNS query to its DNS server (HostInfo.EgressDNS), and refuses
	// everything else it sends, at the host's end of its network, out of
	// its processes' reach: the Runner's allowlist decides what passes.
	// Set again before a boot (SetEgress).
	RestrictEgress bool
}

// Disk is a persistent directory of the Sandbox's own.
type Disk struct {
	Name   string // [a-z0-9-], unique within the Sandbox
	Target string // absolute path inside the Sandbox
	// Apart, with a disk limit (Resources.DiskMiB), limits this Disk on
	// its own, to the same size, instead of sharing the limit with the
	// root filesystem and the other Disks: for Claude Code's state, which
	// must stay writable when a Session's own writes have filled the rest.
	Apart bool
	// From, if set, is a Disk that RemoveKeepingDisks kept (its
	// dir/<name>): Create moves it in, with everything on it, instead of
	// making an empty one. A Create that fails puts it back.
	From string
}

// DiskBind mounts one subdirectory of a Disk, made empty at Start if
// missing, at Target.
type DiskBind struct {
	Disk   string // a Disk's Name
	Sub    string // one path element: no slash, not . or ..
	Target string // absolute path inside the Sandbox
}

// Pruned is an entry PruneDisk deleted: its name, and the bytes of disk
// it held.
type Pruned struct {
	Name  string
	Bytes int64
}

// Bind mounts a host directory into the Sandbox. Files the Sandbox's root
// writes through a Bind are owned by the host's root.
type Bind struct {
	Source   string // absolute host path
	Target   string // absolute path inside the Sandbox
	ReadOnly bool
}

// Tmpfs is a memory-only mount.
type Tmpfs struct {
	Target string
	Mode   os.FileMode
}

// Resources are CPU, memory and disk limits. Zero means the backend's
// default.
type Resources struct {
	CPUs      float64
	MemoryMiB int
	// DiskMiB bounds what the Sandbox writes: its root filesystem's own
	// writes and its Disks together (not its Binds, nor its Tmpfs, which
	// count as memory). Fixed when the Sandbox is made: a Start keeps it.
	// Zero where the backend gives no limit (HostInfo.DiskLimit).
	DiskMiB int
}

// HostInfo says what a backend can enforce on this host.
type HostInfo struct {
	// Limits lists what is enforced ("memory", "cpu", "pids").
	Limits []string
	// Notes are sentences for the Runner's start log, such as what cannot be
	// enforced here and why.
	Notes []string
	// MaxCPUs and MaxMemoryMiB cap every Sandbox's Resources.
	MaxCPUs      float64
	MaxMemoryMiB int
	// MaxDiskMiB caps every Sandbox's DiskMiB, and is what one gets that
	// asks for none; 0: no cap, a Sandbox is limited only if it asks.
	MaxDiskMiB int
	// DiskLimit says how the host enforces a disk limit; empty where it
	// cannot, and Notes say why.
	DiskLimit string
	// CPUs and MemoryMiB are the host's, which all its Sandboxes share.
	CPUs      float64
	MemoryMiB int
	// Relay is the host address ("ip:port") the Runner's relay must listen
	// on for Sandboxes to reach it at RelayHost.
	Relay string
	// EgressProxy and EgressDNS are the host addresses ("ip:port") where
	// the Runner's egress proxy (TCP) and DNS server (UDP and TCP) must
	// listen for restricted Sandboxes (Spec.RestrictEgress).
	EgressProxy, EgressDNS string
	// NoDocker, when set, is why this backend runs no Docker in a Sandbox,
	// naming the way out: Create refuses a Spec with Docker, with it.
	NoDocker string
}

// State is a Sandbox's life-cycle state.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateStopped State = "stopped"
)

// Status reports one Sandbox.
type Status struct {
	ID    string
	State State
	// Resources are what the backend gave, after capping.
	Resources Resources
	// Notes say where the backend gave less than the Spec asked.
	Notes []string
	// Addr is the address the Sandbox's connections to the relay come
	// from, the same from Create to Remove and no other Sandbox's; the
	// zero Addr for a backend that can't say.
	Addr netip.Addr
	// OOMKills is how many of the Sandbox's processes the kernel killed
	// for want of memory since it last started (its memory limit reached);
	// 0 where the backend can't say.
	OOMKills int64
	// DiskUsedMiB is how much of its disk limit (Resources.DiskMiB) the
	// running Sandbox uses, and DiskFull says it is reached, or an Apart
	// Disk's: a write there then fails with ENOSPC. Both zero where there is no limit or the
	// Sandbox is not running.
	DiskUsedMiB int
	DiskFull    bool
}

// Cmd is a process to Exec.
type Cmd struct {
	Args []string
	// Env is the process's whole environment. It reaches the process
	// in-band: never written to a file on the host or in the Sandbox, never
	// on any process's command line.
	Env []string
	// Dir is the working directory inside the Sandbox; "/" if empty.
	Dir string
	// User is a user name or uid inside the Sandbox; root if empty.
	User string
	// TTY, when set, runs the process on a pseudo-terminal of that size;
	// Stdout then carries the terminal's output and Stderr is unused.
	TTY *WinSize
	// Stdin, Stdout and Stderr are as in os/exec; nil means /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// WinSize is a terminal size.
type WinSize struct {
	Cols, Rows uint16
}

// Process is a running Exec.
type Process interface {
	// Wait waits for the process to exit and its output to be copied, and
	// returns its exit code.
	Wait() (int, error)
	// Resize changes the terminal size; ErrNotSupported without a TTY.
	Resize(WinSize) error
	// Kill kills the process and the rest of its process group (what it
	// started and did not move out of it).
	Kill() error
}

// Output runs cmd in Sandbox id and returns what it wrote to stdout and
// stderr, together. A non-zero exit is an error naming the command, its
// exit code and that output.
func Output(ctx context.Context, b Backend, id string, cmd Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := b.Exec(ctx, id, cmd)
	if err != nil {
		return "", err
	}
	code, err := p.Wait()
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited %d: %s", cmd.Args[0], code, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}
