package allot

import (
	"fmt"
	"time"
)

// Every command line allot prints for an operator (remedies, next steps,
// resume, reopen, backfill, catch-up, look-up, show) is built here, so that
// renaming a flag touches one place. Each is complete and runnable as
// printed (values are quoted with ShellQuote where a shell would need it);
// the tests run them (e2e/remedy_test.go and the tests of each command).

// episodeTarget names one episode on a starter command line.
func episodeTarget(pipeline, episodeID string) string {
	return fmt.Sprintf("--pipeline %s --episode %s", pipeline, episodeID)
}

// stepTarget names one step of one episode.
func stepTarget(pipeline, episodeID, step string) string {
	return episodeTarget(pipeline, episodeID) + " --step " + step
}

// ShowCommand shows an episode: its steps, tasks and the commands that move
// it on.
func ShowCommand(pipeline, episodeID string) string {
	return "starter episode show " + episodeTarget(pipeline, episodeID)
}

// LookupCommand asks a paid step's vendor what it holds under the step's
// idempotency key (read-only); it prints the adopt command when the vendor
// knows the task.
func LookupCommand(pipeline, episodeID, step string) string {
	return "starter episode lookup " + stepTarget(pipeline, episodeID, step)
}

// AdoptCommand records the vendor's task ref as the step's.
func AdoptCommand(pipeline, episodeID, step, ref string) string {
	return "starter episode resolve " + stepTarget(pipeline, episodeID, step) + " --adopt " + ShellQuote(ref)
}

// RetryCommand sends a parked step's task again under its idempotency key.
func RetryCommand(pipeline, episodeID, step string) string {
	return "starter episode resolve " + stepTarget(pipeline, episodeID, step) + " --retry"
}

// ResubmitCommand sends a parked step as a new task (a new revision: one
// more charge).
func ResubmitCommand(pipeline, episodeID, step string) string {
	return "starter episode resolve " + stepTarget(pipeline, episodeID, step) + " --resubmit"
}

// AbandonCommand gives a parked step up, with a reason.
func AbandonCommand(pipeline, episodeID, step, reason string) string {
	return "starter episode resolve " + stepTarget(pipeline, episodeID, step) + " --abandon --reason " + ShellQuote(reason)
}

// ReworkCommand runs a paid step again as a new revision (one more charge).
func ReworkCommand(pipeline, episodeID, step string) string {
	return "starter episode rework " + stepTarget(pipeline, episodeID, step)
}

// ReassembleCommand runs an episode's free steps after its paid ones again.
func ReassembleCommand(pipeline, episodeID string) string {
	return "starter episode reassemble " + episodeTarget(pipeline, episodeID)
}

// ResumeCommand starts an unsettled episode's workflow again when it has
// none; the workflow resumes from the ledger.
func ResumeCommand(pipeline, episodeID string) string {
	return "starter episode resume " + episodeTarget(pipeline, episodeID)
}

// ApproveCommand and RejectCommand answer an episode at its approval gate.
func ApproveCommand(pipeline, episodeID string) string {
	return "starter episode approve " + episodeTarget(pipeline, episodeID)
}

// ApproveWaitingCommand approves every episode of a pipeline that waits
// for approval, each with its own decision.
func ApproveWaitingCommand(pipeline string) string {
	return "starter episode approve --pipeline " + pipeline + " --waiting"
}

// RejectCommand rejects an episode at its approval gate, with a reason.
func RejectCommand(pipeline, episodeID, reason string) string {
	return "starter episode reject " + episodeTarget(pipeline, episodeID) + " --reason " + ShellQuote(reason)
}

// BudgetRaiseCommand raises budget's limit for one period to limit (minor
// units), with a reason.
func BudgetRaiseCommand(budget, period string, limit int64, reason string) string {
	return fmt.Sprintf("starter budget raise %s --period %s --limit %d --reason %s", budget, period, limit, ShellQuote(reason))
}

// BudgetShowCommand shows one period of a budget: the tasks that draw on
// it and its raises.
func BudgetShowCommand(budget, period string) string {
	return fmt.Sprintf("starter budget show %s --period %s", budget, period)
}

// BudgetAcknowledgeCommand acknowledges, with a reason, the charges of a
// budget's period that its records leave out (check's charge_unreserved).
func BudgetAcknowledgeCommand(budget, period, reason string) string {
	return fmt.Sprintf("starter budget acknowledge %s --period %s --reason %s", budget, period, ShellQuote(reason))
}

// BackfillCommand backfills pipeline's schedule over [from, to), with the
// given extra flags (--dry-run, --yes, --no-wait).
func BackfillCommand(pipeline string, from, to time.Time, flags ...string) string {
	cmd := fmt.Sprintf("starter schedule backfill --pipeline %s --from %s --to %s", pipeline, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	for _, f := range flags {
		cmd += " " + f
	}
	return cmd
}

// CatchUpCommand settles the times pipeline's schedule missed up to until.
func CatchUpCommand(pipeline string, until time.Time) string {
	return fmt.Sprintf("starter schedule catch-up --pipeline %s --until %s", pipeline, until.UTC().Format(time.RFC3339))
}

// ScheduleCreateCommand creates a pipeline's schedule from its
// configuration.
func ScheduleCreateCommand(pipeline string) string {
	return "starter schedule create --pipeline " + pipeline
}

// ScheduleDescribeCommand shows a pipeline's Schedule as Temporal holds
// it, with its next times.
func ScheduleDescribeCommand(pipeline string) string {
	return "starter schedule describe --pipeline " + pipeline
}

// ScheduleUnpauseCommand unpauses a pipeline's schedule (and settles the
// times it missed under the pipeline's catch_up policy).
func ScheduleUnpauseCommand(pipeline string) string {
	return "starter schedule unpause --pipeline " + pipeline
}

// InputListCommand lists a pipeline's inputs.
func InputListCommand(pipeline string) string {
	return "starter input list --pipeline " + pipeline
}

// VendorResumeCommand resumes a paused vendor (and closes its breaker).
func VendorResumeCommand(vendor string) string {
	return "starter vendor resume " + ShellQuote(vendor)
}

// ImportCommand imports an old system's runs from a file or folder, with
// extra flags (--in-place, --data-dir D, --over-cap).
func ImportCommand(pipeline, from string, flags ...string) string {
	cmd := fmt.Sprintf("starter import --pipeline %s --from %s", pipeline, ShellQuote(from))
	for _, f := range flags {
		cmd += " " + f
	}
	return cmd
}

// WorkerCommand starts the worker on the ledger at url (shell-quoted as
// given; the caller makes a path absolute and redacts a password).
func WorkerCommand(ledgerURL string) string {
	return "go run ./worker --ledger " + ShellQuote(ledgerURL)
}

// RecoverSQLiteCommand copies what SQLite can still read of a damaged
// SQLite file (its tables: the indexes are built anew) into a new one,
// with the sqlite3 shell's .dump.
func RecoverSQLiteCommand(damaged, to string) string {
	return "sqlite3 " + ShellQuote(damaged) + " .dump | sqlite3 " + ShellQuote(to)
}

// CheckCommand audits the ledger at url, read-only.
func CheckCommand(ledgerURL string) string {
	return "starter check --ledger " + ShellQuote(ledgerURL)
}

// EpisodesCommand lists a pipeline's episodes.
func EpisodesCommand(pipeline string) string {
	return "starter episodes --pipeline " + pipeline
}

// StatsCommand counts a pipeline's runs and episodes by outcome and reason.
func StatsCommand(pipeline string) string {
	return "starter stats --pipeline " + pipeline
}

// VendorListCommand shows every vendor's shared state.
func VendorListCommand() string {
	return "starter vendor list"
}

// OperatorTokenCommand adds an operator with a fresh token to the operator
// page's token file (created with mode 0600), printing no token.
func OperatorTokenCommand(name, file string) string {
	return "starter operator-token --name " + ShellQuote(name) + " --file " + ShellQuote(file)
}

// ConsoleCommand serves the operator page, acting with the operators of a
// token file when one is given.
func ConsoleCommand(addr, tokenFile string) string {
	cmd := "starter console --addr " + addr
	if tokenFile != "" {
		cmd += " --token-file " + ShellQuote(tokenFile)
	}
	return cmd
}

// SchedulePauseCommand pauses a pipeline's schedule with a note saying why.
func SchedulePauseCommand(pipeline, note string) string {
	return "starter schedule pause --pipeline " + pipeline + " --note " + ShellQuote(note)
}
