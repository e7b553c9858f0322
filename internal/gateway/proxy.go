package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	outdial "kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/store"
)

// MaxBodyBytes bounds the request body the Gateway holds, so it can send a
// request again once a token is refreshed: a Sandbox can't make the Hub
// hold more. MCP's messages are far smaller.
const MaxBodyBytes = 4 << 20

// dropOut are the headers from the Sandbox that never reach an MCP server:
// the Session's token, cookies, and what says where the request came from.
// The proxy drops hop-by-hop headers and X-Forwarded-* itself.
var dropOut = []string{"Authorization", "Proxy-Authorization", "Cookie", "Forwarded", "Via", "X-Real-Ip"}

// dropBack are the headers from an MCP server that never reach the
// Sandbox: its cookies, and its OAuth challenge, so Claude Code never
// tries to sign in itself.
var dropBack = []string{"Set-Cookie", "Set-Cookie2", "WWW-Authenticate"}

// outbound is what one request is sent on with, from Serve to rewrite
// and retryTransport.
type outbound struct {
	target  *url.URL
	drop    []string    // every header secret's header, in any case
	headers http.Header // the header secrets' values, or the OAuth token
	oauth   string      // the Installation, when its token may be refreshed and the request sent again
	body    []byte      // the request's body, held for that
	started bool        // the Installation is one the Session's run started with
}

// retryTransport sends a request of an OAuth Installation again, with its
// held body, once its token is refreshed, when the server refused the
// token: the Session never notices.
type retryTransport struct{ g *Gateway }

func (t retryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.g.send(r)
	out, _ := r.Context().Value(outboundKey{}).(outbound)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || out.oauth == "" {
		return resp, err
	}
	resp.Body.Close()
	t.g.log.Info("the MCP server refused the Installation's token: refreshing it and sending the request again", "installation", out.oauth, "method", r.Method)
	tok, err := t.g.accessToken(r.Context(), out.oauth, strings.TrimPrefix(out.headers.Get("Authorization"), "Bearer "))
	if err != nil {
		return nil, refusal{http.StatusConflict, err.Error()}
	}
	again := r.Clone(r.Context())
	again.Body, again.ContentLength = io.NopCloser(bytes.NewReader(out.body)), int64(len(out.body))
	again.Header.Set("Authorization", "Bearer "+tok)
	return t.g.send(again)
}

// errSlow is why a request the MCP server did not answer in time ended.
var errSlow = errors.New("the MCP server did not answer in time")

// send sends r, giving the server g.timeout to answer it: a server that
// never answers holds the request's body (up to MaxBodyBytes) no longer.
// An answer that came in time, a stream maybe, goes on as long as r.
func (g *Gateway) send(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(g.timeout, func() { cancel(errSlow) })
	resp, err := g.transport.RoundTrip(r.WithContext(ctx))
	if !timer.Stop() && err == nil {
		resp.Body.Close()
		err = errSlow
	}
	if err != nil {
		cancel(nil)
		if errors.Is(context.Cause(ctx), errSlow) {
			return nil, refusal{http.StatusGatewayTimeout, fmt.Sprintf("the Installation's MCP server did not answer within %s (HUB_GATEWAY_TIMEOUT on the Hub)", g.timeout)}
		}
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// cancelOnClose ends its request's context once the proxy is done with
// the answer.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// refusal is an answer the Gateway gives instead of the server's.
type refusal struct {
	status int
	msg    string
}

func (r refusal) Error() string { return r.msg }

type outboundKey struct{}

func (g *Gateway) newProxy(t http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: t,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.In.Context().Value(outboundKey{}).(outbound)
			target := *out.target
			pr.Out.URL, pr.Out.Host = &target, target.Host
			for name := range pr.Out.Header {
				if slices.ContainsFunc(append(dropOut, out.drop...), func(d string) bool { return strings.EqualFold(d, name) }) ||
					strings.HasPrefix(strings.ToLower(name), "x-forwarded-") {
					delete(pr.Out.Header, name)
				}
			}
			for name, vs := range out.headers {
				pr.Out.Header[name] = vs
			}
		},
		// MCP answers stream (SSE): each event goes on as it comes.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			for name := range resp.Header {
				if slices.ContainsFunc(dropBack, func(d string) bool { return strings.EqualFold(d, name) }) {
					delete(resp.Header, name)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var rf refusal
			if errors.As(err, &rf) {
				refuse(w, rf.status, rf.msg)
				return
			}
			var out *outdial.RefusedError
			if errors.As(err, &out) {
				refuse(w, http.StatusBadGateway, "the Installation's MCP server is refused by the Hub: "+out.Error())
				return
			}
			g.log.Warn("MCP server unreachable", "err", err)
			refuse(w, http.StatusBadGateway, "the Installation's MCP server is unreachable from the Hub")
		},
	}
}

// Serve sends one request of the Session s's Claude Code to the MCP server
// of the Installation id, with the Installation's header secrets added. s
// is the Session a live mod token named. It answers 403 for an
// Installation the Session's run didn't start with or that is no longer
// on for its Repo, 409 when the run has no value for a header secret the
// server declares or an OAuth Installation's server moved since, 413
// beyond MaxBodyBytes, and logs the Session, Installation, method, status
// and time, never content or headers; Metrics is told the Installation
// and status.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, s store.Session, id string) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	var out outbound
	defer func() {
		g.log.Info("gateway request", "session", s.ID, "installation", id, "method", r.Method, "status", sw.status,
			"ms", time.Since(start).Milliseconds())
		if g.metrics != nil {
			label := "unknown"
			if out.started {
				label = id
			}
			g.metrics.GatewayRequest(label, sw.status)
		}
	}()
	out, status, msg := g.outbound(r.Context(), s, id)
	if status != 0 {
		refuse(sw, status, msg)
		return
	}
	if r.ContentLength > MaxBodyBytes {
		refuse(sw, http.StatusRequestEntityTooLarge, fmt.Sprintf("a request to an MCP server is at most %d bytes", MaxBodyBytes))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		refuse(sw, http.StatusBadRequest, "the request's body could not be read")
		return
	}
	if len(body) > MaxBodyBytes {
		refuse(sw, http.StatusRequestEntityTooLarge, fmt.Sprintf("a request to an MCP server is at most %d bytes", MaxBodyBytes))
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.body = body
	g.proxy.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), outboundKey{}, out)))
}

// outbound works out where a request of the Session goes and with which
// header secrets, or the status and message that refuse it.
func (g *Gateway) outbound(ctx context.Context, s store.Session, id string) (outbound, int, string) {
	// vetted is what a refusal returns: once id is one the Session
	// started with, it is counted by its id.
	var vetted outbound
	internal := func(err error) (outbound, int, string) {
		g.log.Error("gateway", "session", s.ID, "installation", id, "err", err)
		return vetted, http.StatusInternalServerError, "the Hub failed to handle this request; its log has the detail"
	}
	rows, err := g.store.MCP.SessionInstallations(ctx, s.ID)
	if err != nil {
		return internal(err)
	}
	i := slices.IndexFunc(rows, func(r store.SessionInstallation) bool { return r.InstallationID == id })
	if i < 0 {
		return vetted, http.StatusForbidden, fmt.Sprintf("Installation %s is not one this Session started with", id)
	}
	vetted.started = true
	on, _, err := g.on(ctx, s.RepoID)
	if err != nil {
		return internal(err)
	}
	in := slices.IndexFunc(on, func(x store.Installation) bool { return x.ID == id })
	if in < 0 {
		return vetted, http.StatusForbidden, fmt.Sprintf("Installation %s was taken off this Session's Repo since it started", id)
	}
	srv, err := g.store.MCP.MCPServerByID(ctx, on[in].ServerID)
	if err != nil {
		return internal(err)
	}
	snap, err := g.open(s.ID, rows[i])
	if err != nil {
		return internal(err)
	}
	// The URL the run started with, as its values: an edit of the server
	// reaches a Session at its next wake or Restart, never in between.
	target, err := url.Parse(rows[i].URL)
	if err != nil {
		return internal(err)
	}
	out := outbound{target: target, headers: http.Header{}, started: true}
	for _, h := range srv.Headers {
		out.drop = append(out.drop, h.Header)
		j := slices.IndexFunc(snap.Headers, func(x snapHeader) bool { return x.Key == h.Key && strings.EqualFold(x.Header, h.Header) })
		if j < 0 {
			// A value goes only to the header it was entered for, and a
			// request is never sent without one.
			return vetted, http.StatusConflict, fmt.Sprintf("Installation %s has no value for its header secret %s as this Session started: set one, then restart the Session", id, h.Key)
		}
		out.headers.Set(h.Header, strings.Replace(h.Format, valueMark, snap.Headers[j].Value, 1))
	}
	if srv.Auth == AuthOAuth && rows[i].URL != srv.URL {
		// The token is as it is now, got for the server's URL now: it
		// never goes to the one the run started with.
		return vetted, http.StatusConflict, fmt.Sprintf("Installation %s's MCP server moved since this Session started: restart the Session to reach it", id)
	}
	if srv.Auth == AuthOAuth {
		// The token as it is now: a disconnect stops the Session at once.
		tok, err := g.accessToken(ctx, id, "")
		if errors.Is(err, errdefs.ErrConflict) {
			return vetted, http.StatusConflict, err.Error()
		}
		if err != nil {
			return internal(err)
		}
		out.headers.Set("Authorization", "Bearer "+tok)
		out.oauth = id
	}
	return out, 0, ""
}

// refuse answers with a JSON message the way the Hub's API does, and no
// challenge.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": "kndl gateway: " + msg})
}

// statusWriter records the status for the log, and lets the proxy flush
// through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
