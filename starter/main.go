// Command starter is allot's operator CLI: it starts runs exactly as a
// Schedule would and reads the ledger. Every command takes --json.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/pipeline"
	"allot/workflows"
)

// Exit codes.
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitViolations = 3
	// exitInterrupted: Ctrl-C (SIGINT) or SIGTERM stopped the command; what
	// it started goes on (128 + SIGINT, as a shell reports it).
	exitInterrupted = 130
)

type command struct {
	summary string
	run     func(ctx context.Context, env *cli, args []string) error
}

var commands = map[string]command{
	"run":            {"start a ScheduledRun for a pipeline (same key as its Schedule)", runCommand},
	"episodes":       {"list a pipeline's episodes from the ledger", episodesCommand},
	"check":          {"audit the ledger, its artifacts and (--vendor) the vendors' bills, read-only; exits 3 on violations or a vendor not reconciled", checkCommand},
	"import":         {"import an old system's runs as completed episodes, paying nothing (JSON Lines or one folder per old ID)", importCommand},
	"input":          {"the inputs a pipeline consumes, one per new episode: add|list|withdraw", inputCommand},
	"episode":        {"show or command one episode: show|lookup|approve|reject|rework|reassemble|resolve|resume", episodeCommand},
	"costs":          {"costs per episode and step, from the ledger", costsCommand},
	"stats":          {"count runs and episodes by outcome and reason, and periods on time per month, from the ledger", statsCommand},
	"setup":          {"register allot's search attributes in the namespace (idempotent)", setupCommand},
	"schedule":       {"a pipeline's Temporal Schedule: create|update|describe|list|pause|unpause|trigger|backfill|catch-up|delete", scheduleCommand},
	"runs":           {"list a pipeline's ScheduledRun and Episode executions, from Temporal's visibility, and its periods' deadline records", runsCommand},
	"budget":         {"money budgets per period: list|show|set-limit (alias raise)|acknowledge (charges outside its records, with a reason)", budgetCommand},
	"drift":          {"what the vendors' bills say that the ledger cannot explain: list|ack|reconcile (the worker reconciles by itself every minute)", driftCommand},
	"vendor":         {"the vendors' shared state and promises: pause|resume|list|show (a paused vendor's steps wait, then go on by themselves; show says what allot can promise with one)", vendorCommand},
	"console":        {"serve the operator page: spend, forecast and what needs a human, live; operators of a token file act on it", consoleCommand},
	"operator-token": {"add an operator with a fresh token to the operator page's token file (the token is written to the file only)", operatorTokenCommand},
}

// cli carries what every command shares: config, output mode and streams.
type cli struct {
	cfg       app.Config
	address   string
	namespace string
	// resolvedNamespace is the namespace the last dial used.
	resolvedNamespace string
	json              bool
	// barOpen: a progress bar is drawn on stderr without its newline.
	barOpen bool
	stdout  io.Writer
	stderr  io.Writer

	// given are the flags set on the command line, with their values: the
	// commands the CLI prints carry them (see givenFlags).
	given map[string]string

	// pipelineSet and pipelineErr are the pipeline file as pipelines
	// loaded it.
	pipelineSet *pipeline.Set
	pipelineErr error
	// noLedger is why the schedule commands have no ledger to read (there
	// is none yet), with where it comes from and the command that makes
	// one.
	noLedger error
}

// usageError is a command line mistake: exit 2, with the command's usage.
type usageError struct{ error }

// violationsError means check found violations: exit 3.
var errViolations = errors.New("ledger invariants violated")

// errInterrupted: the command was stopped while it watched something that
// goes on; it has said so and how to watch again. Exit 130.
var errInterrupted = errors.New("interrupted")

// errReported is an error the command has printed already (as part of its
// JSON result): exit 1 without printing it again.
var errReported = errors.New("reported")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		msg := fmt.Sprintf("unknown command %q", args[0])
		if meant := meantCommand(args); meant != "" {
			msg += ": did you mean `" + meant + "`? (`starter -h` lists every command)"
			fmt.Fprintf(stderr, "starter: %s\n", msg)
		} else {
			fmt.Fprintf(stderr, "starter: %s\n\n", msg)
			printUsage(stderr)
		}
		if wantsJSON(args[1:]) {
			printJSONError(stdout, msg, errTypeUsage)
		}
		return exitUsage
	}
	app.WarnUnknownEnv(slog.New(slog.NewTextHandler(stderr, nil)), os.Environ())
	env := &cli{cfg: app.ConfigFromEnv(), stdout: stdout, stderr: stderr}
	err := cmd.run(ctx, env, args[1:])
	var uerr usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "starter %s: %v\n", args[0], uerr.error)
		if env.json || wantsJSON(args[1:]) {
			printJSONError(stdout, uerr.Error(), errTypeUsage)
		}
		return exitUsage
	case errors.Is(err, errViolations):
		return exitViolations
	case errors.Is(err, errReported):
		return exitError
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	default:
		env.printError(args[0], err)
		return exitError
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: starter <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun `starter <command> -h` for its flags.")
}

// flags returns a flag set with the shared flags bound.
func (c *cli) flags(name string, temporalFlags bool) *flag.FlagSet {
	fs := flag.NewFlagSet("starter "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
	fs.StringVar(&c.cfg.Ledger, "ledger", c.cfg.Ledger, "ledger: sqlite:PATH or postgres:// URL (env "+app.EnvLedger+")")
	fs.StringVar(&c.cfg.Pipelines, "pipelines", c.cfg.Pipelines, "pipeline file (env "+app.EnvPipelines+"; default: embedded)")
	if temporalFlags {
		fs.StringVar(&c.cfg.TaskQueue, "task-queue", c.cfg.TaskQueue, "task queue (env "+app.EnvTaskQueue+", default allot)")
		fs.StringVar(&c.address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS or 127.0.0.1:7233)")
		fs.StringVar(&c.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE or default)")
	}
	return fs
}

// freeTextFlags are the flags whose values the ledger keeps as free text:
// each is bounded by allot.CheckText before anything is written.
var freeTextFlags = []string{"reason", "note", "by", "over-budget", "request-id"}

// scanFlags walks args as fs.Parse will: the flags given, in order, and
// the index of the first argument that is not a flag (len(args) if none).
func scanFlags(fs *flag.FlagSet, args []string) (names []string, positional int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return names, i + 1
		}
		if len(a) < 2 || a[0] != '-' {
			return names, i
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		names = append(names, name)
		f := fs.Lookup(name)
		if f == nil || hasValue {
			continue
		}
		if isBoolFlag(f) {
			continue
		}
		i++ // the flag's value
	}
	return names, len(args)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// refuseRepeatedFlags refuses a flag given twice: every starter flag takes
// one value, and the flag package would silently keep the last.
func refuseRepeatedFlags(fs *flag.FlagSet, args []string) error {
	names, _ := scanFlags(fs, args)
	seen := map[string]bool{}
	for _, n := range names {
		// A switch given twice says the same thing; a value given twice
		// would keep only the last.
		if f := fs.Lookup(n); seen[n] && f != nil && !isBoolFlag(f) {
			return fmt.Errorf("--%s is given twice: give it once (it takes one value; run one command per value)", n)
		}
		seen[n] = true
	}
	return nil
}

// parseNamed parses a command whose one positional argument (a budget's
// name) may come before its flags or after them.
func (c *cli) parseNamed(fs *flag.FlagSet, args []string) (string, error) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], c.parse(fs, args[1:])
	}
	_, i := scanFlags(fs, args)
	if i < len(args) && (i == 0 || args[i-1] != "--") {
		rest := append(append([]string{}, args[:i]...), args[i+1:]...)
		return args[i], c.parse(fs, rest)
	}
	return "", c.parse(fs, args)
}

func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if err := refuseRepeatedFlags(fs, args); err != nil {
		return usageError{err}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{strayValue(fs, args)}
	}
	for _, name := range freeTextFlags {
		if f := fs.Lookup(name); f != nil {
			if err := allot.CheckText("--"+name, f.Value.String()); err != nil {
				return usageError{err}
			}
		}
	}
	c.given = map[string]string{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = f.Value.String() })
	c.cfg = c.cfg.WithDefaults()
	if err := c.cfg.Validate(); err != nil {
		return usageError{settingFlags(fs, err)}
	}
	return nil
}

// valueFlag is the flag a command's one bare value most likely goes with
// (`starter drift ack 12 ...` is --id 12), "" for a command with none.
func valueFlag(command string) string {
	switch {
	case command == "starter drift ack":
		return "id"
	case command == "starter import":
		return "from"
	case strings.HasPrefix(command, "starter episode "):
		return "episode"
	case slices.Contains([]string{"starter run", "starter episodes", "starter costs", "starter stats", "starter runs"}, command):
		return "pipeline"
	}
	return ""
}

// strayValue says what to make of a value no flag took: the flag package
// stops at it, so the flags after it were not read. The command line with
// the value given to its flag, when the command has one for it.
func strayValue(fs *flag.FlagSet, args []string) error {
	at := len(args) - fs.NArg()
	value, rest := args[at], args[at+1:]
	var unread []string
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			unread = append(unread, "--"+name)
		}
	}
	after := ""
	if len(unread) > 0 {
		after = fmt.Sprintf(", so the flags after it (%s) were not read: flags go before any other value", strings.Join(unread, " "))
	}
	before, _ := scanFlags(fs, args[:at])
	later, _ := scanFlags(fs, rest)
	name := valueFlag(fs.Name())
	if name != "" && fs.Lookup(name) != nil && (at == 0 || args[at-1] != "--") && !slices.Contains(before, name) && !slices.Contains(later, name) {
		line := append(strings.Fields(fs.Name()), args[:at]...)
		line = append(append(line, "--"+name, value), rest...)
		return fmt.Errorf("unexpected argument %q%s, and every value goes with a flag: did you mean `%s`?", value, after, shellJoin(line))
	}
	return fmt.Errorf("unexpected argument %q%s, and every value goes with a flag (`%s -h` lists them)", value, after, fs.Name())
}

// settingFlags adds to a settings error the flags that set what it names:
// Validate names the environment variables, and the value may as well have
// come from a flag.
func settingFlags(fs *flag.FlagSet, err error) error {
	var named []string
	for _, s := range []struct{ env, flag string }{{app.EnvLedger, "ledger"}, {app.EnvTaskQueue, "task-queue"}, {app.EnvVendorURL, "vendor-url"}} {
		if strings.Contains(err.Error(), s.env) && fs.Lookup(s.flag) != nil {
			named = append(named, "--"+s.flag)
		}
	}
	if len(named) == 0 {
		return err
	}
	return fmt.Errorf("%w (from %s or the environment)", err, strings.Join(named, " and "))
}

func (c *cli) dial(ctx context.Context) (client.Client, error) {
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts, err := app.TemporalOptions(c.address, c.namespace, logger)
	if err != nil {
		return nil, err
	}
	c.resolvedNamespace = opts.Namespace
	if c.resolvedNamespace == "" {
		c.resolvedNamespace = client.DefaultNamespace
	}
	cl, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, app.ConnectError(err, opts, "is the dev server running? `go run ./devserver`")
	}
	if err := app.CheckNamespace(ctx, cl, opts, app.NamespaceSource(c.namespace)); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// print writes v as JSON, or calls text for people.
func (c *cli) print(v any, text func(w io.Writer)) {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	text(tw)
	tw.Flush()
}

func (c *cli) printError(cmd string, err error) {
	errType := allot.ErrorType(err)
	if c.json {
		_ = json.NewEncoder(c.stdout).Encode(map[string]string{"error": err.Error(), "type": errType})
	}
	if errType != "" {
		fmt.Fprintf(c.stderr, "starter %s: %s: %s\n", cmd, errType, allot.ErrorMessage(err))
		return
	}
	fmt.Fprintf(c.stderr, "starter %s: %v\n", cmd, err)
}

func runCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("run", true)
	var (
		pipelineName, nominal, key string
		wait, follow, printEpisode bool
	)
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline to run (required)")
	fs.StringVar(&nominal, "nominal-time", "", "planned time, RFC3339 (default: now); picks the period and the key")
	fs.StringVar(&key, "key", "", "allocation key (default: the key the pipeline's Schedule forms for the nominal time)")
	fs.BoolVar(&wait, "wait", false, "wait for the run and print its result")
	fs.BoolVar(&follow, "follow", false, "wait for the run, then for its episode to finish or to wait for an operator (approval, parked step), and print where it stands")
	fs.BoolVar(&printEpisode, "print-episode", false, "wait for the run and print only its episode's ID, for a shell variable: EP=$(starter run ... --print-episode)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	if printEpisode && c.json {
		return usageError{errors.New("--print-episode prints the episode's ID alone, --json the whole result: give one of them")}
	}
	in := operator.RunInput{Pipeline: pipelineName, Key: key, Wait: wait || follow || printEpisode}
	if nominal != "" {
		t, err := time.Parse(time.RFC3339, nominal)
		if err != nil {
			return usageError{fmt.Errorf("--nominal-time %q is not RFC3339: write it like 2026-08-03T02:00:00Z", nominal)}
		}
		in.NominalTime = t
	}
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	if nominal != "" && in.NominalTime.IsZero() {
		// Runs takes the zero time for "now": a zero time given on purpose
		// is an absurd one.
		p, err := pipelines.Get(pipelineName)
		if err != nil {
			return err
		}
		return allot.Errorf(allot.InvalidInput, "--nominal-time %s: %v", nominal, p.CheckNominalTime(in.NominalTime, time.Now()))
	}
	runs := &operator.Runs{Pipelines: pipelines, TaskQueue: c.cfg.TaskQueue, Namespace: c.resolvedNamespace,
		ReadLedger: c.viewLedger, OnNoWorker: func(nw report.NoWorker) { c.printNoWorker("run", nw) }}
	// The key, resolved once, and consent counted in money: what the run
	// would reserve, read before it starts. A bad key or time is refused
	// here, before Temporal is contacted.
	preview, err := runs.Preview(ctx, in)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	runs.Client = cl
	// Stopped while it watches, the run goes on: say so and how to watch
	// it again, instead of failing with "context canceled".
	stopped := func(key string) error {
		if key == "" {
			fmt.Fprintf(c.stderr, "starter run: interrupted; the run may have started: run the same command again, it attaches to the run if there is one\n")
			return errInterrupted
		}
		again := []string{"starter", "run", "--pipeline", pipelineName, "--key", key}
		if nominal != "" {
			again = append(again, "--nominal-time", nominal)
		}
		if follow {
			again = append(again, "--follow")
		} else {
			again = append(again, "--wait")
		}
		again = append(again, c.givenFlags("ledger", "pipelines", "task-queue", "address", "namespace")...)
		fmt.Fprintf(c.stderr, "starter run: stopped watching; the run goes on. Follow it again with:\n  %s\n", shellJoin(again))
		if c.json {
			printJSONError(c.stdout, "stopped watching; the run goes on: follow it again with "+shellJoin(again), "interrupted")
		}
		return errInterrupted
	}
	res, err := runs.Start(ctx, preview, in.Wait)
	if err != nil {
		if ctx.Err() != nil {
			return stopped(res.WorkflowID)
		}
		return err
	}
	out := followedRun{RunResult: res, Budgets: preview.Forecast}
	if follow && res.Result != nil && res.Result.EpisodeID != "" {
		st, err := runs.FollowEpisode(ctx, pipelineName, res.Result.EpisodeID)
		if err != nil {
			if ctx.Err() != nil {
				return stopped(res.WorkflowID)
			}
			return err
		}
		out.Episode = &st
	}
	if printEpisode {
		id, err := runEpisode(res)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, id)
		return nil
	}
	c.print(out, func(w io.Writer) { printRun(w, out) })
	return nil
}

// runEpisode is the ID of the episode a run owns, for --print-episode; an
// error says what the run did instead.
func runEpisode(res operator.RunResult) (string, error) {
	if r := res.Result; r != nil && r.EpisodeID != "" {
		return r.EpisodeID, nil
	}
	if r := res.Result; r != nil {
		return "", allot.Errorf(allot.NotReady, "run %s owns no episode: it was %s (%s)", res.WorkflowID, r.Outcome, r.Reason)
	}
	return "", allot.Errorf(allot.NotReady, "run %s has no result yet", res.WorkflowID)
}

// nominalFrom says in words where a run's nominal time came from.
var nominalFrom = map[allot.NominalTimeSource]string{
	allot.NominalFromInput:     "given when the run was started: --nominal-time, else the time of the request",
	allot.NominalFromSchedule:  "the Schedule's planned time",
	allot.NominalFromKey:       "the time its key carries",
	allot.NominalFromStartTime: "the Schedule's start time, which gave no planned time",
}

// printRun writes what `starter run` did for people. A key whose run had
// finished is reused: this command started and paid nothing, whatever that
// run's own outcome was.
func printRun(w io.Writer, out followedRun) {
	res := out.RunResult
	fmt.Fprintf(w, "%s\t%s\n", res.Action, res.WorkflowID)
	fmt.Fprintf(w, "run id\t%s\n", res.RunID)
	if r := res.Result; r != nil {
		if res.Action == operator.RunExisting {
			fmt.Fprintf(w, "outcome\treused: the key's run had finished, so nothing was started and nothing paid (that run: %s, %s)\n", r.Outcome, r.Reason)
		} else {
			fmt.Fprintf(w, "outcome\t%s (%s)\n", r.Outcome, r.Reason)
		}
		if r.EpisodeID != "" {
			fmt.Fprintf(w, "episode\t%s (period %s, sequence %d)\n", r.EpisodeID, r.Period, r.Sequence)
		}
		if r.Input != "" {
			fmt.Fprintf(w, "input\t%s\n", r.Input)
		}
		from := nominalFrom[r.NominalTimeSource]
		if from == "" {
			from = "from " + string(r.NominalTimeSource)
		}
		fmt.Fprintf(w, "nominal time\t%s (%s)\n", r.NominalTime.Format(time.RFC3339), from)
	}
	printForecasts(w, out.Budgets)
	if st := out.Episode; st != nil {
		fmt.Fprintf(w, "episode stage\t%s\n", st.Stage)
		if a := st.Attention; a != nil {
			fmt.Fprintf(w, "attention\t%s: %s\n", a.ErrorType, a.Reason)
			for _, r := range a.Remedies {
				fmt.Fprintf(w, "remedy\t%s\n", r)
			}
		}
	}
}

// followedRun is a run's result and, with --follow, where its episode
// stands.
type followedRun struct {
	operator.RunResult
	Episode *workflows.EpisodeState `json:"episode,omitempty"`
	// Budgets forecast what the run reserves in each budget period that
	// covers its paid steps, against what the period has free.
	Budgets []operator.BudgetForecast `json:"budgets,omitempty"`
}

func episodesCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("episodes", false)
	var in report.EpisodesInput
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&in.Period, "period", "", "only this period, e.g. 2026-W32 or 2026-08-07")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.EpisodesResult, error) {
		in.Pipelines = set
		return report.Episodes(ctx, led, in)
	}, printEpisodes)
}

func printEpisodes(w io.Writer, res report.EpisodesResult) {
	fmt.Fprintln(w, "EPISODE\tPERIOD\tSEQ\tSTATUS\tNOMINAL TIME\tKEY")
	for _, e := range res.Episodes {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", e.ID, e.Period, e.Sequence, e.Status, e.NominalTime.Format(time.RFC3339), e.AllocationKey)
	}
}

func checkCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("check", false)
	var (
		in          report.CheckInput
		vendor, wfs bool
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "only this pipeline (default: all)")
	fs.DurationVar(&in.StaleIntent, "stale-intent", ledger.DefaultStaleAfter, "an intent without a reference older than this is an unknown outcome (also the grace for an episode's first outcome and run)")
	fs.BoolVar(&vendor, "vendor", false, "also reconcile the ledger's costs with each HTTP vendor's charge list (the pipeline file's and the default one)")
	fs.StringVar(&c.cfg.VendorURL, "vendor-url", c.cfg.VendorURL, "the default vendor's API, for --vendor (env "+app.EnvVendorURL+"); its key comes from "+paidvendor.EnvVendorAPIKey+" or "+paidvendor.EnvVendorAPIKeyFile)
	fs.BoolVar(&wfs, "workflows", false, "also ask Temporal whether every unsettled episode has its Episode workflow, of this ledger (read-only)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.StaleIntent <= 0 {
		return usageError{fmt.Errorf("--stale-intent %s: give a positive duration, e.g. 1h", in.StaleIntent)}
	}
	// The pipeline file gives the budgets whose limits and reservations
	// are checked, the vendors' idempotency horizons, and the vendors to
	// reconcile.
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	in.Pipelines = pipelines
	if vendor {
		in.Vendors = report.HTTPVendors(pipelines, c.cfg.VendorURL, func() (string, error) {
			return paidvendor.EnvCredentials{}.VendorAPIKey(ctx)
		})
	}
	if wfs {
		cl, err := c.dial(ctx)
		if err != nil {
			return err
		}
		defer cl.Close()
		in.Workflows = &report.WorkflowCheckInput{Client: cl}
	}
	res, err := askLedger(ctx, c, viewLedger, func(_ *pipeline.Set, led *ledger.Ledger) (report.CheckResult, error) {
		if err := c.knownPipeline(ctx, led, in.Pipeline); err != nil {
			return report.CheckResult{}, err
		}
		if in.Workflows != nil {
			in.Workflows.LedgerID = led.ID()
		}
		return report.Audit(ctx, led, in)
	})
	if err := emit(c, res, err, printCheck); err != nil {
		return err
	}
	if !res.OK {
		return errViolations
	}
	return nil
}

func printCheck(w io.Writer, res report.CheckResult) {
	for _, v := range res.Vendors {
		switch v.Status {
		case report.VendorReconciled:
			shared := ""
			if len(v.SharedAccount) > 0 {
				shared = fmt.Sprintf(" (one account with %s: its bill is reconciled once, against the costs of all)", strings.Join(v.SharedAccount, ", "))
			}
			fmt.Fprintf(w, "vendor %s\t%d charges, %d ledger costs reconciled%s\n", v.Name, v.Charges, v.Costs, shared)
		case report.VendorNotReconciled:
			fmt.Fprintf(w, "vendor %s\tNOT RECONCILED: %s\n", v.Name, v.Reason)
		default:
			fmt.Fprintf(w, "vendor %s\tnothing to reconcile: %s\n", v.Name, v.Reason)
		}
	}
	if res.OK {
		fmt.Fprintf(w, "ok: the ledger's invariants hold (%d artifact files verified)\n", res.Artifacts)
		return
	}
	for _, v := range res.Violations {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Kind, v.Pipeline, dash(v.Episode), v.Detail)
		if v.Fix != "" {
			fmt.Fprintf(w, "\tfix:\t%s\n", v.Fix)
		}
	}
	if len(res.Violations) > 0 {
		fmt.Fprintf(w, "%d violation(s)\n", len(res.Violations))
	} else {
		fmt.Fprintf(w, "the ledger's invariants hold (%d artifact files verified)\n", res.Artifacts)
	}
	if res.Incomplete != "" {
		fmt.Fprintf(w, "not ok: %s\n", res.Incomplete)
	}
}

// givenFlags are the named flags given on the command line, as arguments
// for a command the CLI prints: run in the same environment, it reaches
// what this one did.
func (c *cli) givenFlags(names ...string) []string {
	var out []string
	for _, n := range names {
		if v, ok := c.given[n]; ok {
			out = append(out, "--"+n, v)
		}
	}
	return out
}

// printNoWorker tells, on stderr, that what cmd waits on sits in a task
// queue no worker polls, and how to start one.
func (c *cli) printNoWorker(cmd string, nw report.NoWorker) {
	fmt.Fprintf(c.stderr, "starter %s: %s\n", cmd, c.noWorkerHint(nw))
}

// noWorkerHint says that no worker polls nw's task queue and gives the
// commands that start one for it.
func (c *cli) noWorkerHint(nw report.NoWorker) string {
	if nw.Namespace == "" {
		nw.Namespace = c.resolvedNamespace
	}
	worker := append([]string{"go", "run", "./worker", "--task-queue", nw.TaskQueue, "--namespace", nw.Namespace}, c.givenFlags("address", "ledger", "pipelines")...)
	return fmt.Sprintf("no worker polls task queue %q in namespace %q, so nothing runs until one does; start one with\n  %s\n(`go run ./devserver` runs one itself unless started with --no-worker; a worker says at start what it lacks, e.g. %s for paid steps)",
		nw.TaskQueue, nw.Namespace, shellJoin(worker), app.EnvVendorURL)
}

// shellJoin joins words into a command line a POSIX shell splits back
// into them: words of plain characters bare, others quoted.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w
		if w == "" || strings.ContainsFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
		}) {
			out[i] = allot.ShellQuote(w)
		}
	}
	return strings.Join(out, " ")
}

// subcommand is one `starter <command> <subcommand>`.
type subcommand = func(context.Context, *cli, []string) error

// dispatch runs the subcommand args name of command, or says which there
// are (a usage error), and which one a misspelt one was likely meant to be.
func dispatch(ctx context.Context, c *cli, command string, subs map[string]subcommand, args []string) error {
	if len(args) == 0 || subs[args[0]] == nil {
		names := slices.Sorted(maps.Keys(subs))
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			if near, ok := allot.Nearest(args[0], names); ok {
				return usageError{fmt.Errorf("%s has no subcommand %q: did you mean `%s`? (its subcommands are %v)",
					command, args[0], shellJoin(append([]string{"starter", command, near}, args[1:]...)), names)}
			}
		}
		return usageError{fmt.Errorf("%s takes a subcommand: one of %v", command, names)}
	}
	return subs[args[0]](ctx, c, args[1:])
}

// subcommandsOf are the subcommands of each command that takes one.
var subcommandsOf = map[string]map[string]subcommand{
	"budget": budgetSubcommands, "drift": driftSubcommands, "episode": episodeSubcommands,
	"input": inputSubcommands, "schedule": scheduleSubcommands, "vendor": vendorSubcommands,
}

// meantCommand is the command line an unknown command args[0] was likely
// meant to be: a subcommand of one command given without it (`starter
// reconcile ...`: `starter drift reconcile ...`), or a misspelt command;
// "" when none is near.
func meantCommand(args []string) string {
	var owners []string
	for command, subs := range subcommandsOf {
		if subs[args[0]] != nil {
			owners = append(owners, command)
		}
	}
	if len(owners) == 1 {
		return shellJoin(append([]string{"starter", owners[0]}, args...))
	}
	if near, ok := allot.Nearest(args[0], slices.Sorted(maps.Keys(commands))); ok {
		return shellJoin(append([]string{"starter", near}, args[1:]...))
	}
	return ""
}
