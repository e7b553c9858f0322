package session

import (
	"testing"

	"kndl.dev/kndl/internal/store"
)

var allDeliveryStates = []deliveryState{queued, claimed, typing, taken, written}

// TestTheDeliveryTransitionTable walks every pair of delivery states:
// exactly the moves listed happen, and every other changes nothing.
func TestTheDeliveryTransitionTable(t *testing.T) {
	allowed := map[[2]deliveryState]bool{
		{queued, claimed}: true,
		{claimed, queued}: true, {claimed, typing}: true,
		{typing, queued}: true, {typing, taken}: true, {typing, written}: true,
		{taken, written}: true, {taken, queued}: true,
		{written, claimed}: true, {written, queued}: true,
	}
	for _, from := range allDeliveryStates {
		for _, to := range allDeliveryStates {
			d := delivery{state: from}
			moved := d.to(to)
			want := allowed[[2]deliveryState{from, to}]
			switch {
			case moved != want:
				t.Errorf("%s -> %s: moved %v, want %v", from, to, moved, want)
			case want && d.state != to:
				t.Errorf("%s -> %s: is %s after the move", from, to, d.state)
			case !want && d.state != from:
				t.Errorf("%s -> %s refused, yet it is %s", from, to, d.state)
			}
		}
	}
}

// TestEveryAcknowledgementMovesTheDeliveryAsItSays: each source, in each
// state, for a prompt and for a command: the Runner's reply (for that
// prompt only) and the hook take a prompt being typed, its reply that it
// was taken before (for that prompt only) ends its delivery, the transcript
// writes one typed or taken down, the reply ends a command's delivery;
// everything else, an acknowledgement of what is already past, moves
// nothing.
func TestEveryAcknowledgementMovesTheDeliveryAsItSays(t *testing.T) {
	type key struct {
		state   deliveryState
		src     ackSource
		command bool
	}
	moves := map[key]deliveryState{
		{typing, fromHook, false}:       taken,
		{typing, fromTranscript, false}: written,
		{taken, fromTranscript, false}:  written,
		{typing, fromReply, false}:      taken,
		{typing, fromReply, true}:       written,
		{typing, fromBefore, false}:     written,
		{typing, fromBefore, true}:      written,
	}
	for _, st := range allDeliveryStates {
		for _, src := range []ackSource{fromReply, fromHook, fromTranscript, fromBefore} {
			for _, command := range []bool{false, true} {
				for _, of := range []string{"p1", "another"} {
					d := delivery{state: st, p: store.Prompt{ID: "p1", IsCommand: command}}
					want, moves := moves[key{st, src, command}]
					if !moves || ((src == fromReply || src == fromBefore) && of != "p1") {
						want = st
					}
					d.ack(src, of)
					if d.state != want {
						t.Errorf("%s, acknowledged by %s of %s (command %v): is %s, want %s", st, src, of, command, d.state, want)
					}
				}
			}
		}
	}
}
