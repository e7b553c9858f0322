// Package apiclient is the kndl CLI's client for the Hub's API, and the
// CLI's config file that holds where the Hub is and the CLI token. Each
// call the CLI makes is a method here, taking and returning internal/api's
// types, so each /api/ path is written once: tests/style refuses one
// anywhere else but the Hub's route table and tests. Only internal/cli,
// internal/daemon (kndl dev signs this machine in), internal/loadtest and
// tests import it.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Config is the CLI's config file: one Hub and this machine's CLI token.
type Config struct {
	HubURL string `json:"hub_url"`
	Token  string `json:"token"`
}

// ConfigPath is $KNDL_CONFIG, or cli.json in the user's config directory.
func ConfigPath() (string, error) {
	if p := os.Getenv("KNDL_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w (set KNDL_CONFIG to a file path)", err)
	}
	return filepath.Join(dir, "kndl", "cli.json"), nil
}

// LoadConfig reads the CLI's config file.
func LoadConfig() (Config, error) {
	p, err := ConfigPath()
	if err != nil {
		return Config{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, fmt.Errorf("not signed in to a Hub: run kndl login HUB_URL (or kndl dev on this machine)")
	}
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%s is not valid JSON: %w; remove it and sign in again", p, err)
	}
	return c, nil
}

// SaveConfig writes the config file readable only by its user, atomically.
func SaveConfig(c Config) error {
	p, err := ConfigPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Client calls one Hub's API with a CLI token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New makes a client from the config file.
func New() (*Client, error) {
	c, err := LoadConfig()
	if err != nil {
		return nil, err
	}
	return &Client{BaseURL: strings.TrimSuffix(c.HubURL, "/"), Token: c.Token, HTTP: http.DefaultClient}, nil
}

// Error is an error the Hub answered with.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Do sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, out)
}

// Upload posts size bytes read from body, as they are, and decodes the JSON
// answer into out (if not nil).
func (c *Client) Upload(ctx context.Context, path string, body io.Reader, size int64, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	return c.send(req, out)
}

// Download copies the answer to a GET of path to w.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	return c.send(req, w)
}

// UserAgent names the kndl CLI to the Hub, which shows it on the page that
// approves a kndl login.
var UserAgent = "kndl-cli (" + runtime.GOOS + "/" + runtime.GOARCH + ")"

// send sends req with the CLI token and takes the answer: the Hub's
// message as an *Error, or else the body into out, which is an io.Writer
// to copy it to, something to decode JSON into, or nil.
func (c *Client) send(req *http.Request, out any) error {
	req.Header.Set("User-Agent", UserAgent)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("reach the Hub at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct {
			Message string `json:"message"`
		}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		if e.Message == "" {
			e.Message = resp.Status
		}
		if resp.StatusCode == http.StatusUnauthorized {
			e.Message += " (sign in again with kndl login)"
		}
		return &Error{Status: resp.StatusCode, Message: e.Message}
	}
	switch out := out.(type) {
	case nil:
		return nil
	case io.Writer:
		_, err := io.Copy(out, resp.Body)
		return err
	default:
		return json.NewDecoder(resp.Body).Decode(out)
	}
}
