//go:build !linux

package main

import (
	"fmt"
	"io"
)

// landlockRun, where there is no Landlock: usage errors as upstream says
// them, else the launcher's refusal (exit 125, nothing runs).
func landlockRun(argv, _ []string, _, stderr io.Writer) int {
	if _, err := parseLandlockRun(argv); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", llName, err)
		return llExit
	}
	fmt.Fprintf(stderr, "%s: %s\n", llName, llMsgNotEnforced)
	return llExit
}
