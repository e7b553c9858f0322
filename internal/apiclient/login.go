package apiclient

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
)

// Login signs this machine's CLI in to the Hub at hubURL through a browser,
// the device-code way: it makes a CLI token here and sends the Hub only its
// hash, has show print the code and the page to approve it at, waits for a
// signed-in browser to approve, and saves the Hub and the token in the
// config file, readable only by its user. machine names this machine to
// the person approving.
func Login(ctx context.Context, hubURL, machine string, show func(code, approveURL string)) error {
	u, err := url.Parse(strings.TrimSuffix(hubURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not a Hub URL: give one such as https://kndl.example.com", hubURL)
	}
	c := &Client{BaseURL: u.String(), HTTP: http.DefaultClient}
	token, hash := auth.NewToken(auth.CLI)
	var code api.CLILoginCode
	if err := c.Do(ctx, http.MethodPost, "/api/cli/login", api.CLILoginStart{Machine: machine, TokenSHA256: hex.EncodeToString(hash)}, &code); err != nil {
		return fmt.Errorf("start signing in: %w", err)
	}
	show(code.UserCode, code.VerificationURL)
	interval := max(time.Duration(code.Interval)*time.Second, 100*time.Millisecond)
	deadline := time.Now().Add(time.Duration(code.ExpiresIn) * time.Second)
	for {
		var st api.CLILoginStatus
		if err := c.Do(ctx, http.MethodPost, "/api/cli/login/poll", api.CLILoginPoll{DeviceCode: code.DeviceCode}, &st); err != nil {
			return fmt.Errorf("wait for the browser: %w", err)
		}
		switch st.Status {
		case "approved":
			return SaveConfig(Config{HubURL: c.BaseURL, Token: token})
		case "denied":
			return errors.New("the sign-in was denied in the browser")
		case "expired":
			return errors.New("the code expired before a browser approved it: run kndl login again")
		}
		if time.Now().After(deadline) {
			return errors.New("the code expired before a browser approved it: run kndl login again")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Logout revokes this machine's CLI token on its Hub and removes it from
// the config file. A token the Hub no longer takes is removed all the same.
func Logout(ctx context.Context) error {
	cfg, err := LoadConfig()
	if err != nil {
		return err
	}
	if cfg.Token == "" {
		return errors.New("not signed in")
	}
	c := &Client{BaseURL: strings.TrimSuffix(cfg.HubURL, "/"), Token: cfg.Token, HTTP: http.DefaultClient}
	err = c.Do(ctx, http.MethodDelete, "/api/cli/token", nil, nil)
	var apiErr *Error
	if err != nil && !(errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized) {
		return fmt.Errorf("revoke the CLI token: %w", err)
	}
	cfg.Token = ""
	return SaveConfig(cfg)
}
