package oci

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/sandbox"
)

// Every network address the backend uses, in one place.
//
// A Sandbox holds a host-wide slot n (1..maxSlot) from Create to Remove.
// While it runs, slot n is the /30 at sandboxPool + 4n: the host's end of its
// veth pair ("kv<n>") has .1, the Sandbox's end ("eth0", in the network
// namespace "kndl-<n>") has .2 and routes everything through .1. Slot 0's
// /30 is never given out; its .1 is DefaultRelayIP, added to the host's
// loopback, where the Runner's relay listens.
var (
	sandboxPool    = netip.MustParsePrefix("10.174.0.0/16")
	DefaultRelayIP = netip.MustParseAddr("10.174.0.1")
	// blockedNets are what no Sandbox reaches through the host: the one
	// table the Hub's and Runner's own requests refuse too
	// (outbound.RefusedV4), the Sandbox pool itself (no Sandbox to Sandbox
	// traffic), and the host's directly connected networks added at run
	// time. The host's own addresses are
	// closed by the input chain; the host's DNS resolvers are let through on
	// port 53 only; IPv6 is refused whole.
	blockedNets = append(slices.Clone(outbound.RefusedV4), sandboxPool)
)

// maxSlot is the last slot: the pool holds 2^14 /30s, and slot n's uid
// range (uidBase + n*65536) stays below 2^31.
const maxSlot = 1<<14 - 1

const (
	netnsDir = "/run/netns"
	// usernsDir holds, for a Docker Sandbox's slot, the user namespace
	// that owns its network namespace (ownedNetns).
	usernsDir  = "/run/kndl-userns"
	netnsPre   = "kndl-"
	vethPre    = "kv"
	nftTable   = "kndl"
	relayChain = "sandbox_in"
	// natChain and denyChain hold a restricted Sandbox's rules (egress
	// below); like relayChain's, each carries its veth's name.
	natChain  = "sandbox_nat"
	denyChain = "sandbox_deny"
)

// sandboxChains are the chains whose rules are a Sandbox's own.
var sandboxChains = []string{relayChain, natChain, denyChain}

func vethName(slot int) string   { return vethPre + strconv.Itoa(slot) }
func netnsPath(slot int) string  { return filepath.Join(netnsDir, netnsPre+strconv.Itoa(slot)) }
func usernsPath(slot int) string { return filepath.Join(usernsDir, strconv.Itoa(slot)) }

// slotAddrs returns the host's and the Sandbox's address in slot's /30.
func slotAddrs(slot int) (host, guest netip.Addr) {
	b := sandboxPool.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot) * 4
	ip := func(x uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	return ip(v + 1), ip(v + 2)
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}
}

// hostResolvers returns the IPv4 nameservers of the host's resolv.conf that
// a Sandbox can use: loopback ones (systemd-resolved's 127.0.0.53) are of
// no use from another network namespace.
func hostResolvers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err == nil && a.Is4() && !a.IsLoopback() {
			out = append(out, a)
		}
	}
	return out
}

// connectedNets lists the host's directly connected IPv4 networks, outside
// the Sandbox pool: a Sandbox reaches the internet through the host's
// gateway, never the host's neighbours.
func connectedNets() []netip.Prefix {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || ip.IsLoopback() || sandboxPool.Contains(ip) {
			continue
		}
		bits, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, bits).Masked())
	}
	return out
}

// enableHostNetworking adds the relay address to the loopback and turns on
// IPv4 forwarding, which a Sandbox's egress needs. Both are host-wide and
// stay.
func enableHostNetworking(relayIP netip.Addr) (notes []string, err error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find loopback: %w", err)
	}
	err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: ipnet(relayIP, 32)})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("add relay address %s to loopback: %w", relayIP, err)
	}
	const fwd = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(fwd)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(b)) != "1" {
		if err := os.WriteFile(fwd, []byte("1"), 0o644); err != nil {
			return nil, fmt.Errorf("enable IPv4 forwarding: %w", err)
		}
		notes = append(notes, "Turned on net.ipv4.ip_forward, which Sandboxes need to reach the internet.")
	}
	return notes, nil
}

// firewall is the rule set every Sandbox's traffic passes, one nftables
// table ("inet kndl") shared by all backends on the host:
//
//	input:      from a kv* veth, jump to sandbox_in (one accept rule per
//	            running Sandbox: its own relay address and port), else
//	            reject: nothing else of the host is reachable
//	forward:    from a kv* veth, jump to sandbox_out; to a kv* veth only
//	            replies (established, related)
//	sandbox_out: IPv6 rejected; DNS to the resolvers accepted; blockedNets
//	            rejected; the rest (the internet) accepted
//	postrouting: the pool masqueraded on its way out
//	prerouting: from a kv* veth, jump to sandbox_nat (port 80 of the
//	            relay's address to the relay's port, for gh, and a
//	            restricted Sandbox's redirections, see egressRules)
//	forward, first: from a kv* veth, jump to sandbox_deny (a restricted
//	            Sandbox's refusal of whatever is not redirected)
//
// Rejecting rather than dropping makes a refused connection fail at once.
type firewall struct {
	dns     []netip.Addr
	blocked []netip.Prefix
}

func nftKndl() *nftables.Table {
	return &nftables.Table{Name: nftTable, Family: nftables.TableFamilyINet}
}

// ensure (re)writes the table's fixed chains in one transaction; the
// per-Sandbox rules in sandbox_in are kept.
func (fw firewall) ensure() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	accept := nftables.ChainPolicyAccept
	t := c.AddTable(nftKndl())
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddChain(&nftables.Chain{Name: relayChain, Table: t})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "sandbox_out", Table: t})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	c.AddChain(&nftables.Chain{Name: natChain, Table: t})
	c.AddChain(&nftables.Chain{Name: denyChain, Table: t})
	for _, ch := range []*nftables.Chain{input, forward, out, post, pre} {
		c.FlushChain(ch)
	}
	rule := func(ch *nftables.Chain, e ...[]expr.Any) {
		var all []expr.Any
		for _, x := range e {
			all = append(all, x...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}

	rule(input, ifPrefix(unix.NFT_META_IIFNAME, vethPre), jump(relayChain))
	rule(input, ifPrefix(unix.NFT_META_IIFNAME, vethPre), rejectTCP())
	rule(input, ifPrefix(unix.NFT_META_IIFNAME, vethPre), rejectAny())

	rule(pre, ifPrefix(unix.NFT_META_IIFNAME, vethPre), jump(natChain))
	rule(forward, ifPrefix(unix.NFT_META_IIFNAME, vethPre), jump(denyChain))
	rule(forward, ifPrefix(unix.NFT_META_IIFNAME, vethPre), jump("sandbox_out"))
	rule(forward, ifPrefix(unix.NFT_META_OIFNAME, vethPre), ctReply(), verdict(expr.VerdictAccept))
	rule(forward, ifPrefix(unix.NFT_META_OIFNAME, vethPre), verdict(expr.VerdictDrop))

	rule(out, nfproto(unix.NFPROTO_IPV6), rejectAny())
	for _, d := range fw.dns {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			rule(out, ip4Dst(netip.PrefixFrom(d, 32)), l4Port(proto, 53), verdict(expr.VerdictAccept))
		}
	}
	for _, p := range fw.blocked {
		rule(out, ip4Dst(p), rejectTCP())
		rule(out, ip4Dst(p), rejectAny())
	}
	rule(out, verdict(expr.VerdictAccept))

	rule(post, ip4Src(sandboxPool), ifPrefixNot(unix.NFT_META_OIFNAME, vethPre), []expr.Any{&expr.Masq{}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write nftables table %s: %w", nftTable, err)
	}
	return nil
}

// firewallExists reports whether the table and its per-Sandbox chains are
// there (a table an older kndl made lacks the later ones).
func firewallExists() bool {
	c, err := nftables.New()
	if err != nil {
		return false
	}
	for _, name := range sandboxChains {
		if _, err := c.ListChain(nftKndl(), name); err != nil {
			return false
		}
	}
	return true
}

// egressPorts are where a restricted Sandbox's connections and DNS
// queries go: the Runner's egress proxy and DNS server, on the relay's
// address.
type egressPorts struct{ proxy, dns uint16 }

// allowRelay lets the Sandbox on veth reach relay and nothing else of the
// host, and with egress set, restricts it (egressRules). The rules carry
// the veth's name as their comment, so they can be found and removed with
// the Sandbox; they are written in one transaction.
func allowRelay(veth string, relay netip.AddrPort, egress *egressPorts) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := nftKndl()
	add := func(chain string, e ...[]expr.Any) {
		all := ifExact(unix.NFT_META_IIFNAME, veth)
		for _, x := range e {
			all = append(all, x...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: chain, Table: t}, Exprs: all,
			UserData: userdata.AppendString(nil, userdata.TypeComment, veth)})
	}
	relayDst := ip4Dst(netip.PrefixFrom(relay.Addr(), 32))
	add(relayChain, relayDst, l4Port(unix.IPPROTO_TCP, relay.Port()), verdict(expr.VerdictAccept))
	if relay.Port() != sandbox.ForgeAPIPort {
		// gh calls the relay's address, as api.github.localhost, on
		// port 80: sent to the relay's port, which the rule above
		// accepts (input sees the port after the DNAT).
		add(natChain, relayDst, l4Port(unix.IPPROTO_TCP, sandbox.ForgeAPIPort), dnat(relay.Addr(), relay.Port()))
	}
	if egress != nil {
		egressRules(add, relay.Addr(), *egress)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("allow relay for %s: %w", veth, err)
	}
	return nil
}

// egressRules restrict a Sandbox to its relay and the Runner's egress
// proxy and DNS server, on the host's end of its veth, where neither the
// Sandbox's root nor gVisor's own network stack can change them, and
// whatever its processes make of HTTPS_PROXY:
//
//	sandbox_nat:  DNS (UDP and TCP port 53, to any server) to the DNS
//	              server; the relay's address left alone; every other
//	              TCP connection to the proxy, which reads where it was
//	              going (SO_ORIGINAL_DST) and its SNI or Host
//	sandbox_in:   the proxy's and the DNS server's ports accepted
//	sandbox_deny: everything else it would send on (UDP, ICMP) rejected
func egressRules(add func(chain string, e ...[]expr.Any), relay netip.Addr, p egressPorts) {
	relayDst := ip4Dst(netip.PrefixFrom(relay, 32))
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		add(natChain, nfproto(unix.NFPROTO_IPV4), l4Port(proto, 53), dnat(relay, p.dns))
		add(relayChain, relayDst, l4Port(proto, p.dns), verdict(expr.VerdictAccept))
	}
	add(natChain, relayDst, verdict(expr.VerdictAccept))
	add(natChain, nfproto(unix.NFPROTO_IPV4), l4Proto(unix.IPPROTO_TCP), dnat(relay, p.proxy))
	add(relayChain, relayDst, l4Port(unix.IPPROTO_TCP, p.proxy), verdict(expr.VerdictAccept))
	add(denyChain, rejectTCP())
	add(denyChain, rejectAny())
}

// relayRules returns each veth's rules in the per-Sandbox chains, by the
// veth's name.
func relayRules() (map[string][]*nftables.Rule, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	t := nftKndl()
	out := map[string][]*nftables.Rule{}
	for _, chain := range sandboxChains {
		rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, fmt.Errorf("list the rules of %s: %w", chain, err)
		}
		for _, r := range rules {
			if name, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
				out[name] = append(out[name], r)
			}
		}
	}
	return out, nil
}

// denyRelay removes veth's rules.
func denyRelay(veth string) error {
	all, err := relayRules()
	if err != nil || len(all[veth]) == 0 {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return err
	}
	for _, r := range all[veth] {
		if err := c.DelRule(r); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove relay rule of %s: %w", veth, err)
	}
	return nil
}

// setUpNetwork gives slot its network namespace, veth pair, addresses,
// routes and relay rule. The caller holds the host lock; on error, whatever
// was made is torn down.
//
// With docker, the network namespace is owned by a user namespace of the
// slot's uid range, which the Sandbox then joins (ownedNetns): its root
// holds CAP_NET_ADMIN over its own network, as dockerd needs for its
// bridge, veths and NAT. The host's end, its firewall and rp_filter are
// the same either way.
func setUpNetwork(slot int, relay netip.AddrPort, docker bool, egress *egressPorts) (err error) {
	defer func() {
		if err != nil {
			tearDownNetwork(slot)
		}
	}()
	host, guest := slotAddrs(slot)
	if docker {
		if err := ownedNetns(netnsPath(slot), usernsPath(slot), slotUIDBase(slot)); err != nil {
			return err
		}
	}
	h, err := createNetns(netnsPath(slot), docker)
	if err != nil {
		return err
	}
	defer h.Close()
	ns, err := os.Open(netnsPath(slot))
	if err != nil {
		return err
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: vethName(slot)},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns.Fd())),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", veth.Name, err)
	}
	// No IPv6 on the host's end, so not even a link-local address of the
	// host answers a Sandbox; rp_filter drops a forged source address.
	for _, s := range []struct{ path, val string }{
		{"/proc/sys/net/ipv6/conf/" + veth.Name + "/disable_ipv6", "1"},
		{"/proc/sys/net/ipv4/conf/" + veth.Name + "/rp_filter", "1"},
	} {
		if err := os.WriteFile(s.path, []byte(s.val), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set %s: %w", s.path, err)
		}
	}
	hl, err := netlink.LinkByName(veth.Name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(hl, &netlink.Addr{IPNet: ipnet(host, 30)}); err != nil {
		return fmt.Errorf("address %s: %w", veth.Name, err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fmt.Errorf("up %s: %w", veth.Name, err)
	}
	gl, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("find the Sandbox's eth0: %w", err)
	}
	if err := h.AddrAdd(gl, &netlink.Addr{IPNet: ipnet(guest, 30)}); err != nil {
		return fmt.Errorf("address the Sandbox's eth0: %w", err)
	}
	if err := h.LinkSetUp(gl); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: gl.Attrs().Index, Gw: host.AsSlice()}); err != nil {
		return fmt.Errorf("default route of the Sandbox: %w", err)
	}
	return allowRelay(veth.Name, relay, egress)
}

// createNetns makes a network namespace bound at path, or with made
// takes the one ownedNetns bound there, with its loopback up and
// unprivileged ports and ping open to the Sandbox's users (the Sandbox's
// root has no capability over a namespace the host owns). It returns a
// netlink handle inside it. The namespace is entered on a thread locked
// for the purpose and thrown away after, so no other goroutine ever runs
// in it.
func createNetns(path string, made bool) (*netlink.Handle, error) {
	var ns *os.File
	if made {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		ns = f
	} else {
		if err := os.MkdirAll(netnsDir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
		if err != nil {
			return nil, fmt.Errorf("netns %s: %w", path, err)
		}
		f.Close()
	}
	type result struct {
		h   *netlink.Handle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		h, err := func() (*netlink.Handle, error) {
			if ns != nil {
				if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
					return nil, fmt.Errorf("enter network namespace %s: %w", path, err)
				}
			} else if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return nil, fmt.Errorf("unshare network namespace: %w", err)
			} else if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
				return nil, fmt.Errorf("bind network namespace at %s: %w", path, err)
			}
			for _, s := range []struct{ path, val string }{
				{"/proc/sys/net/ipv4/ip_unprivileged_port_start", "0"},
				{"/proc/sys/net/ipv4/ping_group_range", "0 2147483647"},
			} {
				if err := os.WriteFile(s.path, []byte(s.val), 0o644); err != nil {
					return nil, fmt.Errorf("set %s: %w", s.path, err)
				}
			}
			h, err := netlink.NewHandle()
			if err != nil {
				return nil, err
			}
			lo, err := h.LinkByName("lo")
			if err == nil {
				err = h.LinkSetUp(lo)
			}
			if err != nil {
				h.Close()
				return nil, fmt.Errorf("loopback up: %w", err)
			}
			return h, nil
		}()
		ch <- result{h, err}
	}()
	r := <-ch
	if r.err != nil {
		removeNetns(path)
	}
	return r.h, r.err
}

// ownedNetns makes a user namespace mapping 0..65535 to base.. and a
// network namespace it owns, in one helper process, and binds them at
// userPath and netPath, where they stay after the helper is gone.
func ownedNetns(netPath, userPath string, base uint32) (err error) {
	for _, dir := range []string{netnsDir, usernsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	// A user namespace a crash left bound is the slot's, whose lock the
	// caller holds: it goes.
	if exists(userPath) {
		removeNetns(userPath)
	}
	for _, p := range []string{netPath, userPath} {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
		if err != nil {
			return fmt.Errorf("namespace file %s: %w", p, err)
		}
		f.Close()
	}
	defer func() {
		if err != nil {
			removeNetns(netPath)
			removeNetns(userPath)
		}
	}()
	pid, done, err := namespaceHelper(unix.CLONE_NEWUSER|unix.CLONE_NEWNET, base)
	if err != nil {
		return err
	}
	defer done()
	for _, b := range []struct{ ns, path string }{{"user", userPath}, {"net", netPath}} {
		src := fmt.Sprintf("/proc/%d/ns/%s", pid, b.ns)
		if err := unix.Mount(src, b.path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s namespace at %s: %w", b.ns, b.path, err)
		}
	}
	return nil
}

func removeNetns(path string) {
	unix.Unmount(path, unix.MNT_DETACH)
	os.Remove(path)
}

// tearDownNetwork removes what setUpNetwork made for slot; what is missing
// is skipped. Deleting the host's end removes the pair at once (the
// namespace's own teardown is asynchronous, and slot n's veth name must be
// free again for the next Sandbox on it).
func tearDownNetwork(slot int) error {
	var errs []error
	if err := denyRelay(vethName(slot)); err != nil {
		errs = append(errs, err)
	}
	if l, err := netlink.LinkByName(vethName(slot)); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", vethName(slot), err))
		}
	}
	removeNetns(netnsPath(slot))
	if exists(usernsPath(slot)) {
		removeNetns(usernsPath(slot))
	}
	return errors.Join(errs...)
}

// nftables expressions.

func ifName(name string, n int) []byte {
	b := make([]byte, n)
	copy(b, name)
	return b
}

// ifPrefix matches an interface name starting with prefix, as nft's
// iifname "kv*" does: comparing only the prefix's bytes.
func ifPrefix(key expr.MetaKey, prefix string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(prefix)},
	}
}

func ifPrefixNot(key expr.MetaKey, prefix string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte(prefix)},
	}
}

func ifExact(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifName(name, unix.IFNAMSIZ)},
	}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func ip4Addr(offset uint32, p netip.Prefix) []expr.Any {
	e := nfproto(unix.NFPROTO_IPV4)
	e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4})
	a := p.Masked().Addr().As4()
	if p.Bits() < 32 {
		m := net.CIDRMask(p.Bits(), 32)
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m, Xor: []byte{0, 0, 0, 0}})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

func ip4Src(p netip.Prefix) []expr.Any { return ip4Addr(12, p) }
func ip4Dst(p netip.Prefix) []expr.Any { return ip4Addr(16, p) }

func l4Port(proto byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(port >> 8), byte(port)}},
	}
}

func l4Proto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// dnat sends the packet to addr:port (nft's dnat ip to addr:port).
func dnat(addr netip.Addr, port uint16) []expr.Any {
	a := addr.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

func ctReply() []expr.Any {
	mask := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

func rejectTCP() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}
}

func rejectAny() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}
