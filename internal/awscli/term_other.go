//go:build !unix

package awscli

import "os"

// TerminalWidth is the column count of the terminal f is: 0 (unknown) where the terminal cannot be asked.
func TerminalWidth(f *os.File) int { return 0 }
