package github_test

import (
	"context"
	"errors"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/testkit"
)

func client(t *testing.T, gh *testkit.GitHub, app bool) *github.Client {
	t.Helper()
	cfg := github.Config{URL: gh.URL, APIURL: gh.URL, ClientID: gh.ClientID, ClientSecret: gh.ClientSecret}
	if app {
		key, err := github.ParsePrivateKey(gh.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AppID, cfg.PrivateKey = gh.AppID, key
	}
	c, err := github.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseRepoKnowsOnlyThisGitHubsRepos(t *testing.T) {
	c, err := github.New(github.Config{URL: "https://github.com", APIURL: "https://api.github.com"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url, owner, name string
		ok               bool
	}{
		{"https://github.com/Acme/App.git", "acme", "app", true},
		{"https://github.com/acme/app", "acme", "app", true},
		{"https://github.com/acme/app/", "acme", "app", true},
		{"git@github.com:acme/app.git", "acme", "app", true},
		{"ssh://git@github.com/acme/app.git", "acme", "app", true},
		{"https://gitlab.com/acme/app.git", "", "", false},
		{"https://github.com.evil.example/acme/app.git", "", "", false},
		{"git@evil.example:acme/app.git", "", "", false},
		{"https://github.com/acme/app/tree/main", "", "", false},
		{"https://github.com/acme", "", "", false},
		{"https://github.com/acme/..", "", "", false},
		{"https://github.com/-acme/app", "", "", false},
		{"/home/me/src/app", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		owner, name, ok := c.ParseRepo(tt.url)
		if owner != tt.owner || name != tt.name || ok != tt.ok {
			t.Errorf("ParseRepo(%q) = %q, %q, %v; want %q, %q, %v", tt.url, owner, name, ok, tt.owner, tt.name, tt.ok)
		}
	}
}

func TestIsCollaboratorAsksAsTheAppsInstallation(t *testing.T) {
	gh := testkit.NewGitHub(t)
	c := client(t, gh, true)
	ctx := context.Background()
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "bob", true)
	gh.SetCollaborator("acme/bare", "bob", true) // no App there
	tests := []struct {
		repo, login string
		want        bool
	}{
		{"app", "bob", true},
		{"app", "carol", false},
		{"bare", "bob", false},
	}
	for _, tt := range tests {
		got, err := c.IsCollaborator(ctx, "acme", tt.repo, tt.login)
		if err != nil || got != tt.want {
			t.Errorf("%s on acme/%s: %v, %v; want %v", tt.login, tt.repo, got, err, tt.want)
		}
	}
	if n := gh.Calls("installation_token"); n != 1 {
		t.Errorf("minted %d installation tokens, want 1 reused", n)
	}
	gh.SetDown(true)
	if _, err := c.IsCollaborator(ctx, "acme", "app", "bob"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("with GitHub down: %v, want ErrUnavailable, never a no", err)
	}
	if got, err := client(t, gh, false).IsCollaborator(ctx, "acme", "app", "bob"); got || err != nil {
		t.Errorf("without the App: %v, %v; want no access", got, err)
	}
}
