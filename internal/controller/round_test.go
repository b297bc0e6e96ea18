package controller

import (
	"testing"
)

// Every state a round's step reads is set by an earlier step of the round: a step never acts on
// a value that a later step has yet to compute (the class of the heartbeat outage that was set
// by the bring-up step after the repairs step had read it, always false there).
func TestRoundStepsReadWhatEarlierStepsSet(t *testing.T) {
	steps := (&round{or: none{}}).steps()
	set := map[roundState]string{}
	for _, s := range steps {
		for _, st := range s.reads {
			if set[st] == "" {
				t.Errorf("roundStep %q reads %s, which no earlier roundStep sets", s.name, st)
			}
		}
		for _, st := range s.sets {
			set[st] = s.name
		}
	}
	for _, st := range []roundState{stMembership, stRebooting, stOpenRepairs} {
		if set[st] == "" {
			t.Errorf("no roundStep sets %s", st)
		}
	}
}
