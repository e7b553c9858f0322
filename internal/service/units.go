package service

import (
	"fmt"
	"strings"
	"time"
)

// Where the services live on a machine.
const (
	Bin       = "/usr/local/bin/kndl"
	UnitDir   = "/etc/systemd/system"
	ConfigDir = "/etc/kndl"
	StateRoot = "/var/lib/kndl" // shared with the Runner's Sandboxes (oci.DefaultHostDir), so kept o+x

	HubUnit       = "kndl-hub.service"
	HubUser       = "kndl-hub"
	HubEnv        = ConfigDir + "/hub.env"
	HubState      = StateRoot + "/hub"
	HubUsersConf  = "/etc/sysusers.d/kndl-hub.conf"
	BackupUnit    = "kndl-hub-backup.service"
	BackupTimer   = "kndl-hub-backup.timer"
	HubBackups    = HubState + "/backups"
	RunnerUnit    = "kndl-runner.service"
	RunnerEnv     = ConfigDir + "/runner.env"
	RunnerState   = StateRoot + "/runner"
	backupFirst   = "15min"
	restartPause  = "5s"
	unitHeaderFmt = "# Written by kndl %[1]s install; kndl %[1]s uninstall removes it. Each\n# directive and why: docs/security.md, \"The Hub and the Runner as services\".\n"
)

// hubSandbox is the Hub's confinement, for its unit and the backup's: all
// it needs is its state folder, the network and its own files. Each line's
// reason is in docs/security.md; TestTheHubsUnitPassesSystemdsSecurityReview
// holds the whole to systemd-analyze security's "OK".
const hubSandbox = `User=` + HubUser + `
Group=` + HubUser + `
StateDirectory=kndl/hub
StateDirectoryMode=0700
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
RemoveIPC=yes
`

// noCapabilities keeps every capability from a unit's processes.
const noCapabilities = "CapabilityBoundingSet=\nAmbientCapabilities=\n"

// Hub is what kndl hub install writes.
type Hub struct {
	Bin string // the kndl the units run
	// BindLowPorts grants the Hub CAP_NET_BIND_SERVICE, its one
	// capability, when its settings name a port below 1024 (HTTPS on 443,
	// the redirect and ACME's http-01 on 80); otherwise it holds none.
	BindLowPorts bool
	// BackupEvery, when set, adds a timer that backs the store up into
	// HubBackups this often, keeping the newest Keep.
	BackupEvery time.Duration
	Keep        int
}

// serviceHead is what the Hub's and the Runner's units share: the header,
// [Unit], and [Service] up to its logging; command is bin's subcommand.
func serviceHead(command, description, bin, envFile string) string {
	return fmt.Sprintf(unitHeaderFmt, command) + `[Unit]
Description=` + description + `
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart=` + bin + ` ` + command + `
EnvironmentFile=` + envFile + `
Restart=on-failure
RestartSec=` + restartPause + `
StandardOutput=journal
StandardError=journal
`
}

func (h Hub) capabilities() string {
	if h.BindLowPorts {
		return "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n"
	}
	return noCapabilities
}

// Files are the Hub's sysusers.d file and units, and the backup's when it
// has one.
func (h Hub) Files() []File {
	files := []File{
		{Path: HubUsersConf, Mode: 0o644, Body: fmt.Sprintf(unitHeaderFmt, "hub") +
			"u " + HubUser + " - \"kndl Hub\" " + HubState + "\n"},
		{Path: UnitDir + "/" + HubUnit, Mode: 0o644, Body: serviceHead("hub", "kndl Hub", h.Bin, HubEnv) + h.capabilities() + hubSandbox + `
[Install]
WantedBy=multi-user.target
`},
	}
	if h.BackupEvery == 0 {
		return files
	}
	every := Span(h.BackupEvery)
	return append(files,
		File{Path: UnitDir + "/" + BackupUnit, Mode: 0o644, Body: fmt.Sprintf(unitHeaderFmt, "hub") + `[Unit]
Description=kndl Hub: back up the store into ` + HubBackups + `, keeping the newest ` + fmt.Sprint(h.Keep) + `

[Service]
Type=oneshot
ExecStart=` + h.Bin + ` hub backup --into ` + HubBackups + ` --keep ` + fmt.Sprint(h.Keep) + `
EnvironmentFile=` + HubEnv + `
` + noCapabilities + hubSandbox},
		// OnActiveSec counts from the timer's start, at boot or install,
		// so the first backup comes 15 minutes after either, once the Hub
		// has made its store; OnUnitActiveSec then counts from the last
		// backup. A machine rebooted more often than every backs up at
		// each boot instead, never less often.
		File{Path: UnitDir + "/" + BackupTimer, Mode: 0o644, Body: fmt.Sprintf(unitHeaderFmt, "hub") + `[Unit]
Description=kndl Hub: back up the store every ` + every + `

[Timer]
OnActiveSec=` + backupFirst + `
OnUnitActiveSec=` + every + `

[Install]
WantedBy=timers.target
`})
}

// Runner is what kndl runner install writes.
type Runner struct {
	Bin string // the kndl the unit runs
}

// runnerCaps are the capabilities the Runner's unit takes from its
// bounding set: nothing the Runner, crun, runsc or a Sandbox (whose
// capabilities are bounded by the Runner's) uses.
var runnerCaps = []string{
	"CAP_SYS_BOOT", "CAP_SYS_TIME", "CAP_WAKE_ALARM", "CAP_SYS_MODULE", "CAP_SYSLOG", "CAP_MAC_ADMIN", "CAP_MAC_OVERRIDE",
	"CAP_AUDIT_CONTROL", "CAP_AUDIT_READ", "CAP_SYS_PACCT", "CAP_SYS_TTY_CONFIG", "CAP_LINUX_IMMUTABLE", "CAP_BLOCK_SUSPEND",
}

// Files are the Runner's unit. It runs as root, which Sandboxes need, and
// takes no directive that gives it a mount namespace of its own or a
// seccomp filter: its Sandboxes' mounts must be the host's, for the next
// Runner to find after a restart, and a filter would bind every Sandbox.
// KillMode=process: a stop or a restart ends the Runner alone, and its
// Sessions' Claude Code goes on, as when the Runner's process dies.
func (r Runner) Files() []File {
	return []File{{Path: UnitDir + "/" + RunnerUnit, Mode: 0o644, Body: serviceHead("runner", "kndl Runner", r.Bin, RunnerEnv) + `StateDirectory=kndl/runner
StateDirectoryMode=0700
KillMode=process
NoNewPrivileges=yes
CapabilityBoundingSet=~` + strings.Join(runnerCaps, " ") + `

[Install]
WantedBy=multi-user.target
`}}
}

// Span is d as a systemd time span (systemd.time(7)): whole hours, minutes
// or seconds.
func Span(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s%60 == 0:
		return fmt.Sprintf("%dmin", s/60)
	}
	return fmt.Sprintf("%ds", s)
}
