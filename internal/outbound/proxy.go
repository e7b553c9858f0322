package outbound

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// Proxy is an HTTP proxy on loopback that connects only through its
// Dialer, for a program that makes its own connections: git, whose
// http.proxy it is for the host clone. It tunnels CONNECT (https) and
// forwards plain http, and follows no redirect itself, so each one the
// program follows comes back through it and is checked again.
type Proxy struct {
	URL string // http://127.0.0.1:port

	srv    *http.Server
	stop   context.CancelFunc
	ctx    context.Context
	mu     sync.Mutex
	refuse error // the first refusal, for the program's caller
}

// ListenProxy starts a Proxy that lives within ctx; Close stops it and its
// tunnels.
func (d *Dialer) ListenProxy(ctx context.Context) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String()}
	p.ctx, p.stop = context.WithCancel(ctx)
	fwd := &httputil.ReverseProxy{
		Transport: d.Transport(),
		Rewrite:   func(*httputil.ProxyRequest) {}, // a proxy request's URL is absolute already
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.fail(w, err)
		},
	}
	p.srv = &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			fwd.ServeHTTP(w, r)
			return
		}
		up, err := d.DialContext(r.Context(), "tcp", r.Host)
		if err != nil {
			p.fail(w, err)
			return
		}
		p.tunnel(w, up)
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// fail answers a request the Proxy could not make, keeping the first
// refusal.
func (p *Proxy) fail(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway
	var re *RefusedError
	if errors.As(err, &re) {
		status = http.StatusForbidden
		p.mu.Lock()
		if p.refuse == nil {
			p.refuse = re
		}
		p.mu.Unlock()
	}
	http.Error(w, err.Error(), status)
}

// tunnel joins the client's connection to up until either ends or the
// Proxy closes.
func (p *Proxy) tunnel(w http.ResponseWriter, up net.Conn) {
	c, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	stop := context.AfterFunc(p.ctx, func() { c.Close(); up.Close() })
	defer stop()
	defer c.Close()
	defer up.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	go func() {
		io.Copy(up, buf) // what the client sent after CONNECT, then the rest
		if hc, ok := up.(interface{ CloseWrite() error }); ok {
			hc.CloseWrite()
		}
	}()
	io.Copy(c, up)
}

// Refused is the first connection the Proxy refused, or nil.
func (p *Proxy) Refused() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refuse
}

// Close stops the Proxy and cuts its tunnels.
func (p *Proxy) Close() error {
	p.stop()
	return p.srv.Close()
}
