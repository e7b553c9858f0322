package auth

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestNewTokenIsUniqueAndHashed(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range []Kind{Cookie, CLI, Runner, Mod, Session, Setup, Invite, Metrics} {
		tok, h := NewToken(k)
		if seen[tok] {
			t.Fatalf("token repeated: %s", tok)
		}
		seen[tok] = true
		if got := KindOf(tok); got != k {
			t.Errorf("KindOf(%s token) = %v, want %v", k, got, k)
		}
		if !Equal(h, Hash(tok)) {
			t.Errorf("hash of %s token does not match Hash", k)
		}
		if strings.Contains(string(h), tok) || len(h) != 32 {
			t.Errorf("hash of %s token is not a SHA-256: %d bytes", k, len(h))
		}
		if Equal(h, Hash(tok+"x")) {
			t.Errorf("a different token matched %s token's hash", k)
		}
	}
}

func TestZeroKindIsUnset(t *testing.T) {
	var k Kind
	if k.String() != "unset" {
		t.Fatalf("zero Kind = %q, want unset", k.String())
	}
	if KindOf("nothing") != 0 {
		t.Fatal("an unprefixed string has a kind")
	}
}

// TestAMACIsGitHubsWebhookSignatureOfItsDocumentedExample: GitHub's
// documentation on validating webhook deliveries gives this secret,
// payload and X-Hub-Signature-256.
func TestAMACIsGitHubsWebhookSignatureOfItsDocumentedExample(t *testing.T) {
	got := hex.EncodeToString(MAC([]byte("It's a Secret to Everybody"), []byte("Hello, World!")))
	if want := "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("MAC = %s, want GitHub's %s", got, want)
	}
	if Equal(MAC([]byte("It's a Secret to Everybody"), []byte("Hello, World?")), MAC([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))) {
		t.Error("another payload has the same MAC")
	}
}
