package importer

import (
	"context"
	"strings"
	"testing"

	"allot"
)

// import's free texts are bounded before anything is read or written: the
// nil ledger would panic past the check.
func TestFreeTextIsBoundedBeforeAnythingHappens(t *testing.T) {
	ctx := context.Background()
	set := importSet(t)
	long := strings.Repeat("n", allot.MaxTextLen+1)
	for name, call := range map[string]func() error{
		"import --over-budget": func() error {
			_, err := Import(ctx, nil, set, ImportInput{Pipeline: "weekly-video", From: "old.jsonl", OverBudget: long, By: "maria"})
			return err
		},
		"import --by": func() error {
			_, err := Import(ctx, nil, set, ImportInput{Pipeline: "weekly-video", From: "old.jsonl", OverBudget: "paid", By: long})
			return err
		},
	} {
		err := call()
		if allot.ErrorType(err) != allot.InvalidInput || !strings.Contains(err.Error(), "--") {
			t.Errorf("%s with a text over the bound: %v, want InvalidInput naming the flag", name, err)
		}
	}
}
