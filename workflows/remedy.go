package workflows

import (
	"fmt"
	"strings"
	"time"

	"allot"
	"allot/ledger"
)

// Remedies are the commands an operator can run for a paid step parked in
// state for attention: one complete `starter` command per action the command
// table (allot.PaidCommandTable) allows there. Adopting needs the vendor's
// reference, which the operator cannot know: the read-only lookup command
// asks the vendor by the task's idempotency key and prints the exact adopt
// command. The Web UI's current details, the state query and `starter
// episode show` show these; a test runs each of them.
func Remedies(pipelineName, episodeID, step string, state allot.PaidTaskState, attention string) []string {
	target := fmt.Sprintf("--pipeline %s --episode %s --step %s", pipelineName, episodeID, step)
	var out []string
	for _, action := range allot.PaidActionsAllowed(state, attention) {
		switch action {
		case allot.ActionAdopt:
			out = append(out, "starter episode lookup "+target)
		case allot.ActionRetry:
			out = append(out, "starter episode resolve "+target+" --retry")
		case allot.ActionResubmit:
			out = append(out, "starter episode resolve "+target+" --resubmit")
		case allot.ActionAbandon:
			out = append(out, "starter episode resolve "+target+" --abandon --reason "+allot.ShellQuote("abandoned after "+attention))
		case allot.ActionRework:
			out = append(out, "starter episode rework "+target)
		}
	}
	return out
}

// BudgetRemedies are the raises that admit a step refused by budgets: for
// each budget, the period's limit raised to what it has settled and
// reserved plus what the step asks. A raise nudges the episode, which then
// resumes by itself; `resolve --retry` asks again at once.
func BudgetRemedies(pipelineName, episodeID, step string, refused []ledger.BudgetShortfall) []string {
	var out []string
	for _, s := range refused {
		out = append(out, BudgetRaiseCommand(s.Budget, s.Period, s.Needed(), fmt.Sprintf("admit %s/%s step %s", pipelineName, episodeID, step)))
	}
	return out
}

// BudgetRaiseCommand raises budget's limit for one period to limit (minor
// units), with a reason.
func BudgetRaiseCommand(budget, period string, limit int64, reason string) string {
	return fmt.Sprintf("starter budget raise %s --period %s --limit %d --reason %s", budget, period, limit, allot.ShellQuote(reason))
}

// ResumeCommand starts an unsettled episode's workflow again when it has
// none (it never started, ended abnormally, or its history was deleted);
// the workflow resumes from the ledger.
func ResumeCommand(pipelineName, episodeID string) string {
	return fmt.Sprintf("starter episode resume --pipeline %s --episode %s", pipelineName, episodeID)
}

// ReopenCommands reopen a settled episode: reassemble it, or rework one of
// its paid steps (steps, in order), as complete starter commands.
func ReopenCommands(pipelineName, episodeID string, steps []string) []string {
	out := []string{fmt.Sprintf("starter episode reassemble --pipeline %s --episode %s", pipelineName, episodeID)}
	for _, st := range steps {
		out = append(out, fmt.Sprintf("starter episode rework --pipeline %s --episode %s --step %s", pipelineName, episodeID, st))
	}
	return out
}

// CatchUpCommand settles the times pipeline's schedule missed up to until
// (starter schedule catch-up).
func CatchUpCommand(pipelineName string, until time.Time) string {
	return fmt.Sprintf("starter schedule catch-up --pipeline %s --until %s", pipelineName, until.UTC().Format(time.RFC3339))
}

// BackfillCommand backfills pipeline's schedule over [from, to), with the
// given extra flags (--dry-run, --yes, --no-wait).
func BackfillCommand(pipelineName string, from, to time.Time, flags ...string) string {
	cmd := fmt.Sprintf("starter schedule backfill --pipeline %s --from %s --to %s", pipelineName, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	for _, f := range flags {
		cmd += " " + f
	}
	return cmd
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
