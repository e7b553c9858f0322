package testkit

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy a test puts on the line between two parts so it can
// cut that line as a pulled cable or a dead middlebox does: no reset and
// no close, only silence. Bytes in flight wait, as TCP's buffers hold them;
// a connection made during a cut is taken and never answered, as a SYN
// into the void is.
type Proxy struct {
	ln     net.Listener
	target string

	mu sync.Mutex
	// open is closed while the line passes bytes; a cut swaps in a new one.
	open  chan struct{}
	conns map[net.Conn]bool // every connection, both ends; true when it saw a cut
	// gone is closed when the test ends, freeing pipes held by a cut.
	gone chan struct{}
}

// NewProxy listens on loopback and forwards each connection to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, open: make(chan struct{}), conns: map[net.Conn]bool{}, gone: make(chan struct{})}
	close(p.open)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		close(p.gone)
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

// Addr is the address to dial instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops every byte, both ways, on every connection, and every new
// connection from reaching the target, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
	for c := range p.conns {
		p.conns[c] = true
	}
}

// Restore lets bytes pass again. The connections open during the cut are
// closed, as both ends' TCP would have given up on them by the time a cable
// comes back; new ones reach the target.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, cut := range p.conns {
		if cut {
			c.Close()
			delete(p.conns, c)
		}
	}
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// track records conns, or reports false when the line is cut (they are
// then held, marked to close at Restore) or the test has ended.
func (p *Proxy) track(conns ...net.Conn) (open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gone: // the test's Cleanup has closed the rest
		for _, c := range conns {
			c.Close()
		}
		return false
	default:
	}
	select {
	case <-p.open:
		open = true
	default:
	}
	for _, c := range conns {
		p.conns[c] = !open
	}
	return open
}

func (p *Proxy) forward(down net.Conn) {
	if !p.track(down) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		down.Close()
		return
	}
	if !p.track(up, down) { // cut while dialling: both wait for Restore
		return
	}
	go p.pipe(up, down)
	p.pipe(down, up)
}

// pipe copies src to dst, each chunk only while the line is open. An end
// closed during a cut is not passed on: a silent line carries no FIN
// either, and Restore closes what the cut held.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() {
		if !p.wasCut(src) {
			dst.Close()
			src.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			open := p.open
			p.mu.Unlock()
			select {
			case <-open:
			case <-p.gone:
				return
			}
			if p.wasCut(src) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wasCut reports whether c was open during a cut and so is done for.
func (p *Proxy) wasCut(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cut, ok := p.conns[c]
	return cut || !ok
}
