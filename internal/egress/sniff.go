package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxHello bounds what the proxy reads of a connection before it knows the
// host: a TLS ClientHello (post-quantum key shares make it a few KiB) or an
// HTTP request's head.
const maxHello = 64 << 10

// errSniffed ends the TLS handshake once the ClientHello is read: the
// proxy never answers it.
var errSniffed = errors.New("client hello read")

// Sniff reads the start of a connection and returns the host it is for:
// the server name of a TLS ClientHello, or the Host of an HTTP/1 request.
// It returns what it read as well, for the proxy to send on unchanged, so
// TLS stays end to end. A TLS connection without SNI, or a request
// without a Host, is an error.
func Sniff(r io.Reader) (host string, read []byte, err error) {
	var buf bytes.Buffer
	tee := io.TeeReader(io.LimitReader(r, maxHello), &buf)
	br := bufio.NewReader(tee)
	first, err := br.Peek(1)
	if err != nil {
		return "", buf.Bytes(), fmt.Errorf("read the connection's first byte: %w", err)
	}
	if first[0] == 0x16 { // a TLS handshake record
		host, err = serverName(br)
	} else {
		host, err = httpHost(br)
	}
	return host, buf.Bytes(), err
}

// serverName reads a ClientHello with crypto/tls's own parser, stopping
// it as soon as it has the hello.
func serverName(r io.Reader) (string, error) {
	var name string
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errSniffed
	}}
	err := tls.Server(readOnly{r}, cfg).Handshake()
	switch {
	case name != "":
		return name, nil
	case errors.Is(err, errSniffed):
		return "", errors.New("the TLS ClientHello names no server (no SNI)")
	default:
		return "", fmt.Errorf("not a TLS ClientHello: %w", err)
	}
}

// httpHost reads an HTTP/1 request's head and returns its Host, without
// the port.
func httpHost(r *bufio.Reader) (string, error) {
	req, err := http.ReadRequest(r)
	if err != nil {
		return "", fmt.Errorf("neither TLS nor an HTTP request: %w", err)
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		return "", errors.New("the HTTP request has no Host")
	}
	return host, nil
}

// readOnly is a net.Conn that reads r and writes nothing: crypto/tls's
// server parses the ClientHello from it and its answer goes nowhere.
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write(p []byte) (int, error)      { return len(p), nil }
func (readOnly) Close() error                     { return nil }
func (readOnly) LocalAddr() net.Addr              { return nil }
func (readOnly) RemoteAddr() net.Addr             { return nil }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }
