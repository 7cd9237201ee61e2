package workflows

import (
	"reflect"
	"strings"
	"testing"

	"allot"
)

func TestSplitCommand(t *testing.T) {
	for line, want := range map[string][]string{
		`starter episode resolve --pipeline p --episode 2026-W32-0 --step video --abandon --reason 'abandoned after OutcomeUnknown'`: {
			"starter", "episode", "resolve", "--pipeline", "p", "--episode", "2026-W32-0", "--step", "video", "--abandon", "--reason", "abandoned after OutcomeUnknown"},
		`a 'it'\''s' "two words" b\ c`: {"a", "it's", "two words", "b c"},
		`  x  ''  `:                    {"x", ""},
		``:                             nil,
	} {
		got, err := SplitCommand(line)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", line, got, err, want)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`, `a\`} {
		if got, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) = %q, want an error", bad, got)
		}
	}
}

// Whatever a remedy quotes comes back as the same word: a printed command
// runs with exactly the arguments it was built from.
func FuzzRemedyQuoting(f *testing.F) {
	f.Add("abandoned after OutcomeUnknown\x00--reason")
	f.Add("it's\x00\x00a\\b\x00\"q\"\x00 ")
	f.Fuzz(func(t *testing.T, joined string) {
		words := strings.Split(joined, "\x00")
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = allot.ShellQuote(w)
		}
		got, err := SplitCommand(strings.Join(quoted, " "))
		if err != nil || !reflect.DeepEqual(got, words) {
			t.Fatalf("quoted %q split into %q, %v; want %q", strings.Join(quoted, " "), got, err, words)
		}
	})
}
