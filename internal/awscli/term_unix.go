//go:build unix

package awscli

import (
	"os"

	"golang.org/x/sys/unix"
)

// TerminalWidth is the column count of the terminal f is, or 0 when it is not one.
func TerminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
