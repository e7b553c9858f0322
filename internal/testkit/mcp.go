package testkit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"kndl.dev/kndl/internal/auth"
)

// MCPServer is a real remote MCP server, on the official MCP Go SDK's
// streamable HTTP handler, with two tools: echo (its text back) and time
// (the server's clock). With a bearer token it refuses
// a request without it as the SDK does, 401 with an OAuth challenge. It
// records every request's path and headers, and serves
// /.well-known/oauth-protected-resource, so a test sees what reached it.
type MCPServer struct {
	URL string // its MCP endpoint, /mcp

	mu   sync.Mutex
	seen []Seen
}

// Seen is one request an MCPServer got.
type Seen struct {
	Method, Path string
	Header       http.Header
}

// EchoArgs is the echo tool's input.
type EchoArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

// NewMCPServer starts an MCPServer; bearer, when set, is the token every
// request needs in Authorization.
func NewMCPServer(t testing.TB, bearer string) *MCPServer {
	if bearer == "" {
		return newMCPServer(t, nil, "")
	}
	return newMCPServer(t, func(token string) bool { return auth.Equal([]byte(token), []byte(bearer)) }, "")
}

// newMCPServer starts an MCPServer that takes the bearer tokens valid
// accepts (any request, for nil). Its protected resource metadata names
// issuer as its authorization server, or itself.
func newMCPServer(t testing.TB, valid func(token string) bool, issuer string) *MCPServer {
	m := &MCPServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "testkit-mcp", Version: "v1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "send the text back"},
		func(ctx context.Context, req *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "time", Description: "the server's time"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: time.Now().UTC().Format(time.RFC3339)}}}, nil, nil
		})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.seen = append(m.seen, Seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
		m.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	// A client's standalone SSE stream stays open until it goes: cut every
	// connection, taking no new one, or Close would wait for it.
	t.Cleanup(func() {
		hs.Listener.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	m.URL = hs.URL + "/mcp"
	if issuer == "" {
		issuer = hs.URL
	}
	if valid != nil {
		verify := func(ctx context.Context, token string, _ *http.Request) (*mcpauth.TokenInfo, error) {
			if !valid(token) {
				return nil, fmt.Errorf("not a valid token: %w", mcpauth.ErrInvalidToken)
			}
			return &mcpauth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
		}
		h = mcpauth.RequireBearerToken(verify, &mcpauth.RequireBearerTokenOptions{ResourceMetadataURL: hs.URL + "/.well-known/oauth-protected-resource/mcp"})(h)
	}
	mux.Handle("/mcp", h)
	mux.HandleFunc("/.well-known/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, m.URL, issuer)
	})
	return m
}

// Seen returns the requests the server got so far.
func (m *MCPServer) Seen() []Seen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Seen(nil), m.seen...)
}

// SawWellKnown reports whether any request reached a /.well-known/ path.
func (m *MCPServer) SawWellKnown() bool {
	for _, s := range m.Seen() {
		if strings.HasPrefix(s.Path, "/.well-known/") {
			return true
		}
	}
	return false
}
