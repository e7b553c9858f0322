package hub

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
)

// Config is the Hub's configuration. Each field names its environment
// variable and default; FromEnv reads them.
type Config struct {
	// Listen is the address to serve on. HUB_LISTEN, default 127.0.0.1:7380.
	Listen string
	// PublicURL is the URL people and Runners reach the Hub at; browser
	// requests that change anything must come from its origin.
	// HUB_PUBLIC_URL, default http://<Listen>.
	PublicURL string
	// DatabasePath is the SQLite file. HUB_DATABASE_PATH, default
	// $KNDL_HOME/hub.db.
	DatabasePath string
	// SecretsKey seals stored secrets such as setup tokens: 32 random bytes
	// as hex or base64. HUB_SECRETS_KEY, required (kndl dev makes one).
	SecretsKey string
	// Logger is the operator's log; a Session's own output never goes here.
	Logger *slog.Logger
}

// FromEnv reads the Hub's configuration; home is $KNDL_HOME.
func FromEnv(getenv func(string) string, home string) Config {
	c := Config{
		Listen:       getenv("HUB_LISTEN"),
		PublicURL:    getenv("HUB_PUBLIC_URL"),
		DatabasePath: getenv("HUB_DATABASE_PATH"),
		SecretsKey:   getenv("HUB_SECRETS_KEY"),
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7380"
	}
	if c.DatabasePath == "" {
		c.DatabasePath = filepath.Join(home, "hub.db")
	}
	return c
}

// Check fills in defaults that depend on other fields and validates the
// configuration.
func (c *Config) Check() error {
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("HUB_PUBLIC_URL %q: want an http or https URL such as https://kndl.example.com", c.PublicURL)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("HUB_LISTEN %q: want host:port such as 127.0.0.1:7380", c.Listen)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
