//go:build !unix

package main

import "os"

// ttyWidth is 0 (unknown) where the terminal cannot be asked.
func ttyWidth(f *os.File) int { return 0 }
