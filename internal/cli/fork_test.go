package cli

import "testing"

// TestForkAsksTheHubForAForkAtATurnWithAPrompt: kndl fork sends the Turn
// only when --at is given (0 too: the Hub says which Turns there are) and
// the prompt only when there is one; no id is a usage error, an unknown
// one the Hub's message.
func TestForkAsksTheHubForAForkAtATurnWithAPrompt(t *testing.T) {
	askTheHub(t, []hubChange{
		{[]string{"fork", "s1"}, "POST /api/sessions/s1/fork {}", "asleep until a prompt", 0},
		{[]string{"fork", "s1", "--at", "2", "try it another way"}, `POST /api/sessions/s1/fork {"at":2,"prompt":"try it another way"}`, "Its first prompt wakes it", 0},
		{[]string{"fork", "--at", "0", "s1"}, `POST /api/sessions/s1/fork {"at":0}`, "is a fork of", 0},
		{[]string{"fork"}, "", "", 2},
		{[]string{"fork", "s1", "a", "b"}, "", "", 2},
		{[]string{"fork", "nope"}, "", "", 1},
	})
}
