package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/testenv"
)

// TestTheServicesRunUnderSystemdOnHTTPSFromACME: in a container whose PID
// 1 is systemd (a machine booted from this host's own /usr, with a /etc of
// its own and nothing enabled), as an operator would, as root, with
// Debian's Pebble as the machine's ACME CA:
//   - kndl hub install with HUB_TLS=auto starts the Hub on port 443
//     (systemctl is-active says so, its Setup link is in journald), which
//     gets its certificate from Pebble: its /health answers over HTTPS
//     under Pebble's root alone, and plain HTTP redirects there; its
//     process runs as kndl-hub with CAP_NET_BIND_SERVICE alone, no new
//     privileges and a seccomp filter;
//   - kndl runner install starts a Runner paired with kndl runner token
//     create, and the Hub's /health counts it connected;
//   - systemctl restart kndl-hub, the CA stopped first, keeps the store
//     (the metrics token made before still opens /metrics) and the
//     certificate, and the Runner reconnects by itself; so it does after
//     a restart of the Runner;
//   - kndl hub uninstall stops the Hub and removes its unit, and keeps its
//     store and settings.
//
// No Session runs: a Member signs in with GitHub, and this machine has no
// GitHub; the Runner's Sandboxes are tested apart.
func TestTheServicesRunUnderSystemdOnHTTPSFromACME(t *testing.T) {
	t.Parallel()
	testenv.RequireCommand(t, "pebble")
	m := bootMachine(t)
	m.startACME(t)
	m.run(t, []string{"HUB_TLS=auto", "HUB_PUBLIC_URL=" + hubURL, "HUB_LISTEN=127.0.0.1:443", "HUB_HTTP_LISTEN=127.0.0.1:80",
		"HUB_ACME_URL=https://localhost:14000/dir"}, "/root/kndl", "hub", "install")
	m.waitActive(t, "kndl-hub")
	m.waitHealth(t, 0)
	m.hubConfined(t)
	if log := m.run(t, nil, "journalctl", "-u", "kndl-hub", "--no-pager"); !strings.Contains(log, "Setup link") {
		t.Errorf("journalctl -u kndl-hub: got\n%s\nwant the Setup link in the Hub's log", log)
	}
	if got := m.run(t, nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "http://hub.kndl.test/health"); got != "301 "+hubURL+"/health" {
		t.Errorf("plain HTTP to the Hub: got %q, want a 301 to %s/health", got, hubURL)
	}

	// On the Hub's machine, as docs/operating.md has it.
	asHub := func(args string) string {
		return m.run(t, nil, "sh", "-c", "set -a; . /etc/kndl/hub.env; runuser -u kndl-hub -- kndl "+args)
	}
	token := regexp.MustCompile(`kndlr_\S+`).FindString(asHub("runner token create --name box"))
	metrics := regexp.MustCompile(`kndlp_\S+`).FindString(asHub("hub metrics-token"))
	if token == "" || metrics == "" {
		t.Fatalf("got Runner token %q and metrics token %q, want both printed", token, metrics)
	}
	m.run(t, []string{"RUNNER_TOKEN=" + token, "KNDL_HUB_URL=" + hubURL}, "kndl", "runner", "install")
	m.waitActive(t, "kndl-runner")
	m.waitHealth(t, 1)
	m.metricsAnswer(t, metrics, "200")

	m.run(t, nil, "systemctl", "stop", "pebble")
	m.run(t, nil, "systemctl", "restart", "kndl-hub")
	m.waitActive(t, "kndl-hub")
	m.waitHealth(t, 1) // the Runner reconnected, to the certificate kept
	m.metricsAnswer(t, metrics, "200")
	m.metricsAnswer(t, "kndlp_not-the-token", "401")

	m.run(t, nil, "systemctl", "restart", "kndl-runner")
	m.waitActive(t, "kndl-runner")
	m.waitHealth(t, 1)

	m.run(t, nil, "kndl", "hub", "uninstall")
	if got := m.state("kndl-hub"); got == "active" {
		t.Errorf("after kndl hub uninstall kndl-hub is %s, want stopped", got)
	}
	for _, p := range []string{"/etc/systemd/system/kndl-hub.service", "/etc/systemd/system/multi-user.target.wants/kndl-hub.service"} {
		if _, err := os.Lstat(m.path(p)); err == nil {
			t.Errorf("after kndl hub uninstall %s is left", p)
		}
	}
	for _, p := range []string{"/var/lib/kndl/hub/hub.db", "/etc/kndl/hub.env"} {
		if _, err := os.Stat(m.path(p)); err != nil {
			t.Errorf("after kndl hub uninstall: %v; want it kept", err)
		}
	}
	if out, err := m.exec(nil, "curl", "-sf", "--cacert", acmeRoot, hubURL+"/health"); err == nil {
		t.Errorf("after kndl hub uninstall the Hub still answers: %s", out)
	}
}

// hubConfined fails t unless the Hub's process runs as its unit says: as
// kndl-hub, with CAP_NET_BIND_SERVICE alone (bounding and effective), no
// new privileges, and a seccomp filter.
func (m *machine) hubConfined(t *testing.T) {
	t.Helper()
	pid := strings.TrimSpace(m.run(t, nil, "systemctl", "show", "-P", "MainPID", "kndl-hub"))
	uid := strings.TrimSpace(m.run(t, nil, "id", "-u", "kndl-hub"))
	status := m.run(t, nil, "cat", "/proc/"+pid+"/status")
	const bindOnly = "0000000000000400" // 1 << CAP_NET_BIND_SERVICE
	for _, w := range []struct{ field, want string }{
		{"Uid", strings.Repeat(uid+"\t", 3) + uid}, {"CapBnd", bindOnly}, {"CapEff", bindOnly}, {"NoNewPrivs", "1"}, {"Seccomp", "2"},
	} {
		got := regexp.MustCompile(`(?m)^` + w.field + `:\s*(.*)$`).FindStringSubmatch(status)
		if got == nil || strings.TrimSpace(got[1]) != w.want {
			t.Errorf("the Hub's process (%s) %s: got %q, want %q", pid, w.field, got, w.want)
		}
	}
}

// hubURL is the Hub's public URL in the machine, whose /etc/hosts puts
// its name on loopback.
const hubURL = "https://hub.kndl.test"

// In the machine: acmeRoot is the root Pebble issues under, alone;
// caBundle is it and Pebble's own certificate (its directory's), which the
// Hub and the Runner get as SSL_CERT_FILE.
const (
	acmeRoot = "/etc/kndl/acme-root.pem"
	caBundle = "/etc/kndl/ca.pem"
)

// startACME runs Debian's Pebble in the machine as a service, checking
// http-01 on port 80 and tls-alpn-01 on 443 as a public CA does, and puts
// SSL_CERT_FILE in the Hub's and the Runner's settings files before their
// installs, which keep what the files hold.
func (m *machine) startACME(t *testing.T) {
	t.Helper()
	cert, key := selfSigned(t, "localhost")
	files := map[string]string{
		"/etc/pebble/cert.pem": cert, "/etc/pebble/key.pem": key,
		"/etc/pebble/config.json": `{"pebble": {"listenAddress": "127.0.0.1:14000", "managementListenAddress": "127.0.0.1:15000",
	"certificate": "/etc/pebble/cert.pem", "privateKey": "/etc/pebble/key.pem", "httpPort": 80, "tlsPort": 443}}`,
	}
	for p, body := range files {
		os.MkdirAll(filepath.Dir(m.path(p)), 0o755)
		if err := os.WriteFile(m.path(p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hosts, _ := os.ReadFile(m.path("/etc/hosts"))
	os.WriteFile(m.path("/etc/hosts"), append(hosts, "\n127.0.0.1 hub.kndl.test\n"...), 0o644)
	// No random wait before a validation, no nonce refused on purpose.
	m.run(t, nil, "systemd-run", "--unit=pebble", "-E", "PEBBLE_VA_NOSLEEP=1", "-E", "PEBBLE_WFE_NONCEREJECT=0",
		"/usr/bin/pebble", "-config", "/etc/pebble/config.json")
	var root string
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		out, err := m.exec(nil, "curl", "-sf", "--cacert", "/etc/pebble/cert.pem", "https://localhost:15000/roots/0")
		root = out
		return err == nil && strings.HasPrefix(out, "-----BEGIN CERTIFICATE-----")
	}, func() string { return "Pebble never gave its root: " + root })
	os.MkdirAll(m.path("/etc/kndl"), 0o755)
	for p, body := range map[string]string{acmeRoot: root, caBundle: cert + root,
		"/etc/kndl/hub.env": "SSL_CERT_FILE=" + caBundle + "\n", "/etc/kndl/runner.env": "SSL_CERT_FILE=" + caBundle + "\n"} {
		if err := os.WriteFile(m.path(p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// selfSigned is a certificate for name, signed by its own key, and the
// key, PEM.
func selfSigned(t *testing.T, name string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
}

// machine is a container whose PID 1 is systemd, run by crun: this host's
// /usr read-only, /usr/local and the rest of its root writable and its own,
// a /etc copied from this host's with no unit enabled, a network namespace
// of its own with loopback alone.
type machine struct {
	id, root string
	hybrid   bool // crun runs with the cgroup v2 mount hidden (oci's runRuntime)
}

// machinePrefix starts each machine's container name; the rest is the test
// process's pid, so a later run removes those a killed one left.
const machinePrefix = "kndl-systemd-"

func bootMachine(t *testing.T) *machine {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun", "curl")
	if _, err := os.Stat("/usr/lib/systemd/systemd"); err != nil {
		testenv.Lack(t, "systemd installed (/usr/lib/systemd/systemd), to boot as the machine's PID 1")
	}
	var st unix.Statfs_t
	m := &machine{id: fmt.Sprintf("%s%d", machinePrefix, os.Getpid()), root: filepath.Join(t.TempDir(), "root"),
		hybrid: unix.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC}
	m.reapLeftovers()
	for _, d := range []string{"usr", "usrlocal", "etc", "var", "run", "tmp", "proc", "sys", "dev", "root"} {
		if err := os.MkdirAll(filepath.Join(m.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		os.Symlink("usr/"+l, filepath.Join(m.root, l))
	}
	if out, err := exec.Command("cp", "-a", "/etc/.", m.path("/etc")).CombinedOutput(); err != nil {
		t.Fatalf("copy /etc: %v %s", err, out)
	}
	// Nothing of this host's enabled (its nginx, PostgreSQL), no mount
	// from its fstab, no kndl installed here before.
	left, _ := filepath.Glob(m.path("/etc/systemd/system/*.wants"))
	left = append(left, m.path("/etc/systemd/system/default.target"), m.path("/etc/kndl"))
	kndlUnits, _ := filepath.Glob(m.path("/etc/systemd/system/kndl-*"))
	for _, p := range append(left, kndlUnits...) {
		os.RemoveAll(p)
	}
	os.WriteFile(m.path("/etc/fstab"), nil, 0o644)
	if out, err := exec.Command("cp", kndlBinary(t), m.path("/root/kndl")).CombinedOutput(); err != nil {
		t.Fatalf("copy kndl: %v %s", err, out)
	}
	bundle := filepath.Dir(m.root)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(machineSpec(m.root)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := m.crun("run", "-d", "--bundle", bundle, m.id).CombinedOutput(); err != nil {
		t.Fatalf("crun run: %v %s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := m.exec(nil, "journalctl", "--no-pager", "-n", "200")
			t.Logf("the machine's journal:\n%s", out)
		}
		if out, err := m.crun("delete", "-f", m.id).CombinedOutput(); err != nil {
			t.Errorf("crun delete %s: %v %s", m.id, err, out)
		}
	})
	var state string
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		out, _ := m.exec(nil, "systemctl", "is-system-running")
		state = strings.TrimSpace(out)
		return state == "running" || state == "degraded"
	}, func() string { return "systemd never came up in the machine: is-system-running says " + state })
	if state == "degraded" {
		out, _ := m.exec(nil, "systemctl", "--failed", "--no-pager")
		t.Logf("the machine booted degraded:\n%s", out)
	}
	return m
}

// reapLeftovers deletes the machines of test processes that are gone.
func (m *machine) reapLeftovers() {
	out, _ := m.crun("list", "-q").Output()
	for _, id := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(strings.TrimPrefix(id, machinePrefix))
		if !strings.HasPrefix(id, machinePrefix) || err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		m.crun("delete", "-f", id).Run()
	}
}

func (m *machine) path(p string) string { return filepath.Join(m.root, p) }

// crun runs crun with args; on a host with hybrid cgroups in a mount
// namespace of its own where the v2 mount is hidden, which crun 1.8
// refuses (oci's runRuntime says why).
func (m *machine) crun(args ...string) *exec.Cmd {
	if !m.hybrid {
		return exec.Command("crun", args...)
	}
	cmd := exec.Command("sh", append([]string{"-c", `umount /sys/fs/cgroup/unified && exec crun "$@"`, "crun"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd
}

// exec runs a command in the machine as root, with env added to a login's
// PATH, and returns what it printed.
func (m *machine) exec(env []string, args ...string) (string, error) {
	a := []string{"exec", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, e := range env {
		a = append(a, "--env", e)
	}
	out, err := m.crun(append(append(a, m.id), args...)...).CombinedOutput()
	return string(out), err
}

// run is exec, failing the test if the command fails.
func (m *machine) run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := m.exec(env, args...)
	if err != nil {
		t.Fatalf("in the machine, %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// state is what systemctl is-active says of unit.
func (m *machine) state(unit string) string {
	out, _ := m.exec(nil, "systemctl", "is-active", unit)
	return strings.TrimSpace(out)
}

func (m *machine) waitActive(t *testing.T, unit string) {
	t.Helper()
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool { return m.state(unit) == "active" }, func() string {
		out, _ := m.exec(nil, "systemctl", "status", "--no-pager", unit)
		return unit + " never became active:\n" + out
	})
}

// waitHealth waits until the Hub's /health, asked over HTTPS from within
// the machine trusting Pebble's root alone, counts runners connected.
func (m *machine) waitHealth(t *testing.T, runners int) {
	t.Helper()
	want := fmt.Sprintf(`"connected":%d}`, runners)
	var got string
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		got, _ = m.exec(nil, "curl", "-sf", "--cacert", acmeRoot, hubURL+"/health")
		return strings.Contains(got, want)
	}, func() string {
		return fmt.Sprintf("the Hub's /health: got %q, want %d Runners connected", got, runners)
	})
}

// metricsAnswer fails t unless /metrics answers token with the HTTP status
// code want.
func (m *machine) metricsAnswer(t *testing.T, token, want string) {
	t.Helper()
	got := m.run(t, nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", acmeRoot, "-H", "Authorization: Bearer "+token, hubURL+"/metrics")
	if got != want {
		t.Errorf("/metrics with token %.12s…: got %s, want %s", token, got, want)
	}
}

// capNames are the capabilities by number (capability.h).
var capNames = strings.Fields(`CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL CAP_SETGID CAP_SETUID
	CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER
	CAP_SYS_MODULE CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT CAP_SYS_NICE
	CAP_SYS_RESOURCE CAP_SYS_TIME CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE CAP_AUDIT_CONTROL CAP_SETFCAP
	CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM CAP_BLOCK_SUSPEND CAP_AUDIT_READ CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE`)

// machineSpec is the machine's OCI runtime spec: systemd as PID 1 with
// every capability this process holds and no seccomp filter (it mounts, makes the units'
// namespaces and applies their filters itself), and the mounts and
// namespaces it needs (container= tells it it runs in a container).
func machineSpec(root string) string {
	var held []string
	status, _ := os.ReadFile("/proc/self/status")
	if m := regexp.MustCompile(`(?m)^CapBnd:\s*([0-9a-f]+)$`).FindSubmatch(status); m != nil {
		bnd, _ := strconv.ParseUint(string(m[1]), 16, 64)
		for i, c := range capNames {
			if bnd&(1<<i) != 0 {
				held = append(held, `"`+c+`"`)
			}
		}
	}
	caps := strings.Join(held, ",")
	return `{
	"ociVersion": "1.0.2",
	"process": {
		"user": {"uid": 0, "gid": 0},
		"args": ["/usr/lib/systemd/systemd"],
		"env": ["container=crun", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"],
		"cwd": "/",
		"capabilities": {"bounding": [` + caps + `], "effective": [` + caps + `], "permitted": [` + caps + `]},
		"noNewPrivileges": false
	},
	"root": {"path": "` + root + `"},
	"hostname": "kndl-machine",
	"mounts": [
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
		{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "rw"]},
		{"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]},
		{"destination": "/usr/local", "type": "bind", "source": "` + root + `/usrlocal", "options": ["rbind", "rw"]},
		{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=755"]},
		{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}
	],
	"linux": {
		"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "cgroup"}, {"type": "network"}]
	}
}`
}
