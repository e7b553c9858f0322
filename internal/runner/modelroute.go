package runner

import (
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/relay"
)

// modelRoute points a run's Claude Code at the relay's model route for
// its Session token, in both HUB_CLAUDE_TOKEN modes, and has the relay
// hold the Creator's token for the run. Claude Code holds a placeholder,
// new each run (relay, the default), or the token itself (sandbox); the
// relay takes that one credential on Claude Code's own model calls and no
// key of the Sandbox's own, so the model API is no exit from the Sandbox
// and no allowlist needs api.anthropic.com (internal/egress).
func modelRoute(rl *relay.Relay, launch *claude.Launch, id, token, relayURL string, creds protocol.SessionCredentials) error {
	held := creds.ClaudeToken
	if !creds.ClaudeTokenInSandbox {
		held = relay.Placeholder(creds.ClaudeToken)
	}
	if err := rl.Hold(id, creds.ClaudeToken, held); err != nil {
		return err
	}
	launch.OAuthToken = held
	launch.ModelEndpoint = relayURL + "/model/" + token
	return nil
}
