// Package mod is kndl's mod for Claude Code: two plugins embedded in the
// binary (hub-link, whose hooks report what Claude Code does; and
// hub-link-commands, slash commands), written out fresh for each start of
// Claude Code with a third, kndl-gateway, naming the Session's MCP servers
// behind the Hub's Gateway; the hook door (door.go) the Sandbox's init
// serves, which carries the hooks' events to the Runner's relay; and the
// command-hook clients (hook.bash, `kndl mod hook`) of Sandboxes an earlier
// Runner booted. The Runner, internal/cli and the oci backend's init import
// it.
package mod

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

//go:embed all:plugins
var plugins embed.FS

// Plugins are the mod's plugin names, each loaded with its own --plugin-dir.
var Plugins = []string{"hub-link", "hub-link-commands"}

// WriteCopy writes a fresh copy of the mod's plugins into dir (which must
// not exist), so an update never changes the mod under a running Turn.
func WriteCopy(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("mod copy: %w", err)
	}
	return fs.WalkDir(plugins, "plugins", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p[len("plugins"):]))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := plugins.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// GatewayPlugin is the plugin WriteGateway writes: Claude Code names its
// MCP servers plugin:kndl-gateway:<Installation>, and their tools
// mcp__plugin_kndl-gateway_<Installation>__<tool>, so none clashes with a
// server of the Repo's own .mcp.json.
const GatewayPlugin = "kndl-gateway"

// WriteGateway writes, into a mod copy's dir, the plugin that gives Claude
// Code one MCP server per Installation: the relay's /gateway/<id>, with
// the Session token from Claude Code's own environment. The file holds
// neither the token nor any other secret; Claude Code expands ${…} as it
// reads it.
func WriteGateway(dir string, installations []string) error {
	root := filepath.Join(dir, GatewayPlugin)
	if err := os.MkdirAll(filepath.Join(root, ".claude-plugin"), 0o755); err != nil {
		return fmt.Errorf("gateway plugin: %w", err)
	}
	manifest := map[string]any{"name": GatewayPlugin, "version": "1.0.0",
		"description": "The MCP servers the kndl Hub's Gateway gives this Session.", "author": map[string]string{"name": "kndl"}}
	servers := map[string]any{}
	for _, id := range installations {
		servers[id] = map[string]any{"type": "http", "url": "${KNDL_URL}/gateway/" + id,
			"headers": map[string]string{"Authorization": "Bearer ${KNDL_MOD_TOKEN}"}}
	}
	for name, v := range map[string]any{".claude-plugin/plugin.json": manifest, ".mcp.json": map[string]any{"mcpServers": servers}} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("gateway plugin: %w", err)
		}
	}
	return nil
}

// MaxHookBytes bounds one hook event read from Claude Code.
const MaxHookBytes = 1 << 20

// hookRetryFor is how long a hook asks again while the relay can't be
// reached: see Hook, and hook.bash, which has the same.
const hookRetryFor = 10 * time.Second

// Hook is `kndl mod hook`, the hook client of a Claude Code an earlier
// Runner started (hook.bash and the door cost far less CPU: BenchmarkHookCPU): it carries
// one hook event (JSON on in) to the relay at $KNDL_URL with
// the Session token, and writes the Hub's answer to out, where Claude Code
// reads a hook's decision. While the relay is unreachable (its Runner
// restarting) or a restarted Runner waits for the Hub (503) it retries for
// up to 20 s; a hook never fails the Turn, so other failures are reported
// on errOut and Hook returns nil.
//
// While the relay can't be reached (its Runner restarting) a hook asks
// again for hookRetryFor, and Claude Code waits for it. That stays under
// the Hub's delivery timeout (15 s): a prompt whose UserPromptSubmit hook
// never gets through is then taken, and seen in the transcript, before
// the Hub would type it again.
func Hook(ctx context.Context, getenv func(string) string, in io.Reader, out, errOut io.Writer) error {
	base, token := getenv("KNDL_URL"), getenv("KNDL_MOD_TOKEN")
	if base == "" || token == "" {
		fmt.Fprintln(errOut, "kndl mod hook: KNDL_URL and KNDL_MOD_TOKEN are not set; is this a kndl Session?")
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(in, MaxHookBytes+1))
	if err != nil || len(body) > MaxHookBytes {
		fmt.Fprintf(errOut, "kndl mod hook: event unreadable or over %d bytes\n", MaxHookBytes)
		return nil
	}
	deadline := time.Now().Add(hookRetryFor)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mod/hook", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil && time.Now().Before(deadline) && ctx.Err() == nil {
			// The relay is down while its Runner restarts: try again.
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err != nil {
			fmt.Fprintf(errOut, "kndl mod hook: %v\n", err)
			return nil
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, MaxHookBytes))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			out.Write(answer)
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline):
			time.Sleep(500 * time.Millisecond) // the relay's Retry-After: the Hub has not reconnected the Session yet
		default:
			fmt.Fprintf(errOut, "kndl mod hook: %s: %s\n", resp.Status, bytes.TrimSpace(answer))
			return nil
		}
	}
}
