package workflows

import (
	"fmt"
	"strings"

	"allot"
)

// Remedies are the commands an operator can run for a paid step parked in
// state for attention: one complete `starter` command per action the command
// table (allot.PaidCommandTable) allows there. Adopting needs the vendor's
// reference, which the operator cannot know: the read-only lookup command
// asks the vendor by the task's idempotency key and prints the exact adopt
// command. The Web UI's current details, the state query and `starter
// episode show` show these; a test runs each of them.
func Remedies(pipelineName, episodeID, step string, state allot.PaidTaskState, attention string) []string {
	var out []string
	for _, action := range allot.PaidActionsAllowed(state, attention) {
		switch action {
		case allot.ActionAdopt:
			out = append(out, allot.LookupCommand(pipelineName, episodeID, step))
		case allot.ActionRetry:
			out = append(out, allot.RetryCommand(pipelineName, episodeID, step))
		case allot.ActionResubmit:
			out = append(out, allot.ResubmitCommand(pipelineName, episodeID, step))
		case allot.ActionAbandon:
			out = append(out, allot.AbandonCommand(pipelineName, episodeID, step, "abandoned after "+attention))
		case allot.ActionRework:
			out = append(out, allot.ReworkCommand(pipelineName, episodeID, step))
		}
	}
	return out
}

// BudgetRemedies are the raises that admit a step refused by budgets: for
// each budget, the period's limit raised to what it has settled and
// reserved plus what the step asks. A raise nudges the episode, which then
// resumes by itself; `resolve --retry` asks again at once.
func BudgetRemedies(pipelineName, episodeID, step string, refused []allot.BudgetShortfall) []string {
	var out []string
	for _, s := range refused {
		out = append(out, allot.BudgetRaiseCommand(s.Budget, s.Period, s.Needed(), fmt.Sprintf("admit %s/%s step %s", pipelineName, episodeID, step)))
	}
	return out
}

// ReopenCommands reopen a settled episode: reassemble it, or rework one of
// its paid steps (steps, in order), as complete starter commands.
func ReopenCommands(pipelineName, episodeID string, steps []string) []string {
	out := []string{allot.ReassembleCommand(pipelineName, episodeID)}
	for _, st := range steps {
		out = append(out, allot.ReworkCommand(pipelineName, episodeID, st))
	}
	return out
}

// SplitCommand splits a command line into its words the way a POSIX shell
// does for the commands allot prints and documents: words separated by
// blanks, single quotes (allot.ShellQuote's, a quote inside one closed, escaped
// and opened again), double quotes without expansions, and backslash
// escapes outside quotes. The tests and the chaos run use it to run every
// printed remedy exactly as printed.
func SplitCommand(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t', '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'', '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote in %q", c, line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '\\':
			if i+1 == len(line) {
				return nil, fmt.Errorf("trailing backslash in %q", line)
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
