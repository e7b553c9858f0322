package session

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// pipeServer is an HTTP server whose connections are net.Pipe pairs, not
// sockets: a goroutine waiting on one is waiting on channels, which
// testing/synctest counts as durably blocked, so the fake Runner's
// WebSocket lives inside a bubble and the Owner's timers run on the
// bubble's clock. A real socket's read is not durably blocked: the fake
// clock would never move.
type pipeServer struct {
	srv *http.Server
	l   *pipeListener
}

func newPipeServer(h http.Handler) *pipeServer {
	p := &pipeServer{srv: &http.Server{Handler: h}, l: &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}}
	go p.srv.Serve(p.l)
	return p
}

// client is an HTTP client that dials this server, whatever the URL's host.
func (p *pipeServer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		hub, runner := net.Pipe()
		select {
		case p.l.conns <- hub:
			return runner, nil
		case <-p.l.done:
			return nil, net.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}}
}

// Close stops the server; connections it handed over (hijacked for the
// WebSocket) are their holders' to close.
func (p *pipeServer) Close() { p.srv.Close() }

// pipeListener is the server's net.Listener: the connections client dials.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
