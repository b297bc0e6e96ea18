package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Count(0, "node", "nodes"), "0 nodes"},
		{Count(1, "node", "nodes"), "1 node"},
		{Count(2, "node", "nodes"), "2 nodes"},
		{Count(-1, "degree", "degrees"), "-1 degree"},
		{Count(int32(1), "switch", "switches"), "1 switch"},
		{Count(uint64(11), "entry", "entries"), "11 entries"},
		{Count(^uint64(0), "entry", "entries"), "18446744073709551615 entries"},
		{Count(int64(21), "step", "steps"), "21 steps"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
