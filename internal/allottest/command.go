package allottest

import (
	"testing"

	"allot/workflows"
)

// SplitCommand splits a command line as a shell would
// (workflows.SplitCommand), failing the test on a malformed one.
func SplitCommand(t *testing.T, line string) []string {
	t.Helper()
	words, err := workflows.SplitCommand(line)
	if err != nil {
		t.Fatal(err)
	}
	return words
}
