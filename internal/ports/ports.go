// Package ports finds what listens on TCP in a Sandbox, from inside it: it
// asks the kernel's sock_diag (or reads /proc/net/tcp and /proc/net/tcp6
// where there is none) and finds the process holding each listening socket, watches for changes, and carries one connection to a
// port over stdin and stdout. The kndl binary runs it in the Sandbox for the
// Runner (kndl ports watch, kndl ports dial); internal/cli and
// internal/runner import it.
package ports

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// listenState is TCP_LISTEN in /proc/net/tcp's st column.
const listenState = "0A"

// socket is one listening socket.
type socket struct {
	addr  string // as net.JoinHostPort's host: 0.0.0.0, ::, 127.0.0.1
	port  int
	inode string
}

// Options say where to read and what to leave out.
type Options struct {
	// Proc is the proc filesystem's root; default /proc.
	Proc string
	// SkipExe leaves out ports held by a process whose executable is under
	// this directory: Claude Code's own, whose only listener is its login
	// callback.
	SkipExe string
	// SkipPID, if not 0, leaves out ports held by that process: the
	// Sandbox's init (1), kndl's own, whose only listener is the mod's
	// hook door.
	SkipPID int
}

func (o Options) proc() string {
	if o.Proc == "" {
		return "/proc"
	}
	return o.Proc
}

// sockets returns the listening sockets: from sock_diag when proc is this
// machine's own /proc and the kernel has it, else from proc's net/tcp and
// net/tcp6.
func sockets(proc string) ([]socket, error) {
	if proc == "/proc" {
		if out, err := diagListeners(); err == nil {
			return out, nil
		}
	}
	return procSockets(proc)
}

// procSockets reads the listening sockets from proc's net/tcp and net/tcp6.
func procSockets(proc string) ([]socket, error) {
	var out []socket
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(proc, "net", f))
		if errors.Is(err, os.ErrNotExist) && f == "tcp6" {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if i == 0 || len(fs) < 10 || fs[3] != listenState {
				continue
			}
			addr, port, err := parseAddr(fs[1])
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", f, i+1, err)
			}
			out = append(out, socket{addr: addr, port: port, inode: fs[9]})
		}
	}
	return out, nil
}

// parseAddr reads an address as /proc/net/tcp{,6} write it: the IP in hex,
// each 32-bit word in the host's (little-endian) order, then the port.
func parseAddr(s string) (string, int, error) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || (len(h) != 8 && len(h) != 32) {
		return "", 0, fmt.Errorf("malformed address %q", s)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", 0, fmt.Errorf("malformed address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b).String(), int(port), nil
}

// owners maps socket inodes to the process holding each: its pid, command
// name and executable. A process that goes away meanwhile is skipped.
func owners(proc string, want map[string]bool) map[string]owner {
	out := map[string]owner{}
	dirs, _ := os.ReadDir(proc)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(proc, d.Name(), "fd"))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(proc, d.Name(), "fd", fd.Name()))
			inode, ok := strings.CutPrefix(link, "socket:[")
			if err != nil || !ok {
				continue
			}
			inode = strings.TrimSuffix(inode, "]")
			if !want[inode] {
				continue
			}
			if _, seen := out[inode]; seen {
				continue
			}
			comm, _ := os.ReadFile(filepath.Join(proc, d.Name(), "comm"))
			exe, _ := os.Readlink(filepath.Join(proc, d.Name(), "exe"))
			out[inode] = owner{pid: pid, name: strings.TrimSpace(string(comm)), exe: exe}
		}
	}
	return out
}

type owner struct {
	pid       int
	name, exe string
}

// List returns what listens now: each port once, with every address it
// listens on and the process holding it, by port.
func List(o Options) ([]protocol.Port, error) {
	socks, err := sockets(o.proc())
	if err != nil {
		return nil, err
	}
	return describe(o, socks, nil), nil
}

// describe groups sockets by port and names each port's holder, looking up
// only inodes not in known.
func describe(o Options, socks []socket, known map[string]owner) []protocol.Port {
	want := map[string]bool{}
	for _, s := range socks {
		if _, ok := known[s.inode]; !ok {
			want[s.inode] = true
		}
	}
	found := owners(o.proc(), want)
	for k, v := range known {
		found[k] = v
	}
	byPort := map[int]*protocol.Port{}
	skip := map[int]bool{}
	for _, s := range socks {
		who := found[s.inode]
		if o.SkipExe != "" && who.exe != "" && strings.HasPrefix(who.exe, strings.TrimSuffix(o.SkipExe, "/")+"/") || o.SkipPID != 0 && who.pid == o.SkipPID {
			skip[s.port] = true
			continue
		}
		p := byPort[s.port]
		if p == nil {
			p = &protocol.Port{Port: s.port, Addresses: []string{}}
			byPort[s.port] = p
		}
		if !slices.Contains(p.Addresses, s.addr) {
			p.Addresses = append(p.Addresses, s.addr)
		}
		if p.Process == "" && who.name != "" {
			p.Process, p.PID = who.name, who.pid
		}
	}
	out := make([]protocol.Port, 0, len(byPort))
	for port, p := range byPort {
		if skip[port] {
			continue
		}
		slices.Sort(p.Addresses)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b protocol.Port) int { return a.Port - b.Port })
	return out
}

// Every is how often Watch reads the tables.
const Every = 2 * time.Second

// Watch writes the list as one JSON line at start and again each time the
// listening sockets change, reading them every interval, until ctx is done
// or stdin closes (the Runner went away). Processes are looked up only for
// sockets that are new.
func Watch(ctx context.Context, o Options, every time.Duration, stdin io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if stdin != nil {
		go func() { io.Copy(io.Discard, stdin); cancel() }()
	}
	enc := json.NewEncoder(w)
	var last []socket
	known := map[string]owner{}
	first := true
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		socks, err := sockets(o.proc())
		if err != nil {
			return err
		}
		slices.SortFunc(socks, func(a, b socket) int { return strings.Compare(a.inode+a.addr, b.inode+b.addr) })
		if first || !slices.Equal(socks, last) {
			first = false
			list := describe(o, socks, known)
			known = keep(o, socks, known)
			if err := enc.Encode(list); err != nil {
				return err
			}
			last = socks
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// keep returns the owners of socks, looked up once: an inode names one
// socket for its life.
func keep(o Options, socks []socket, known map[string]owner) map[string]owner {
	want := map[string]bool{}
	out := map[string]owner{}
	for _, s := range socks {
		if w, ok := known[s.inode]; ok {
			out[s.inode] = w
		} else {
			want[s.inode] = true
		}
	}
	for k, v := range owners(o.proc(), want) {
		out[k] = v
	}
	return out
}

// Decoder reads the lists Watch writes.
type Decoder struct{ sc *bufio.Scanner }

// NewDecoder reads Watch's output from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &Decoder{sc: sc}
}

// Next returns the next list, or io.EOF.
func (d *Decoder) Next() ([]protocol.Port, error) {
	if !d.sc.Scan() {
		if err := d.sc.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	var out []protocol.Port
	if err := json.Unmarshal(d.sc.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("ports: %w", err)
	}
	return out, nil
}

// DialReady is the line Dial writes once it is connected, before any byte
// of the connection.
const DialReady = "kndl-dial-ok"

// Dial connects to port on this machine, on loopback if it listens there or
// on any address, else on the first address it listens on, writes
// DialReady and a newline to w, then carries the connection: r to it and it
// to w, until either side ends.
func Dial(ctx context.Context, o Options, port int, r io.Reader, w io.Writer) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d: want 1 to 65535", port)
	}
	targets := []string{"127.0.0.1", "::1"}
	if socks, err := sockets(o.proc()); err == nil {
		for _, s := range socks {
			if s.port == port && !net.ParseIP(s.addr).IsUnspecified() && !net.ParseIP(s.addr).IsLoopback() {
				targets = append(targets, s.addr)
			}
		}
	}
	var conn net.Conn
	var err error
	var d net.Dialer
	for _, t := range targets {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err = d.DialContext(dctx, "tcp", net.JoinHostPort(t, strconv.Itoa(port)))
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("nothing in the Sandbox accepts a connection on port %d: %w", port, err)
	}
	defer conn.Close()
	if _, err := io.WriteString(w, DialReady+"\n"); err != nil {
		return err
	}
	// The peer's end of input half-closes the connection; it ends when the
	// port's side does (or ctx).
	go func() {
		io.Copy(conn, r)
		conn.(*net.TCPConn).CloseWrite()
	}()
	context.AfterFunc(ctx, func() { conn.Close() })
	io.Copy(w, conn)
	return nil
}
