// Package plural writes a count with its noun in agreement, for messages people read: "1 node",
// "0 nodes", "3 nodes", never "1 nodes".
package plural

import "fmt"

// integer is any integer type a count comes in (len's int, a proto's int32, a size's int64).
type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Count returns n followed by singular when n is 1 or -1, and by plural otherwise, as English
// writes "1 switch", "0 switches", "3 switches". Both forms are given because English plurals
// are irregular (entry, entries; switch, switches).
func Count[N integer](n N, singular, plural string) string {
	noun := plural
	if n == 1 || (n < 0 && -n == 1) {
		noun = singular
	}
	return fmt.Sprintf("%d %s", n, noun)
}
