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
			out = append(out, "starter episode resolve "+target+" --abandon --reason "+shellQuote("abandoned after "+attention))
		case allot.ActionRework:
			out = append(out, "starter episode rework "+target)
		}
	}
	return out
}

// ResumeCommand starts an unsettled episode's workflow again when it has
// none (it never started, ended abnormally, or its history was deleted);
// the workflow resumes from the ledger.
func ResumeCommand(pipelineName, episodeID string) string {
	return fmt.Sprintf("starter episode resume --pipeline %s --episode %s", pipelineName, episodeID)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
