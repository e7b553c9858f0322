package testkit

import (
	"fmt"
	"net"
	"testing"
)

// TestPortsClaimedAreFreeAndNeverTwice: claims side by side get apart
// blocks, each port of which a process can listen on by number, TCP and
// UDP, where a port picked with ":0" and closed could go to the next
// socket the kernel numbers; a block with a port in use is passed over.
func TestPortsClaimedAreFreeAndNeverTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 40 {
		base := Ports(t, 3)
		for p := base; p < base+3; p++ {
			if seen[p] {
				t.Fatalf("port %d claimed twice", p)
			}
			seen[p] = true
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("claimed port %d: %v", p, err)
			}
			ln.Close()
			pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("claimed port %d: %v", p, err)
			}
			pc.Close()
		}
	}
	// A port something listens on, on any address, is no claim's.
	base := Ports(t, 3)
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", base+2))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := portsFree(base, 3); err == nil {
		t.Fatalf("ports %d to %d found free with %d listened on", base, base+2, base+2)
	}
}
