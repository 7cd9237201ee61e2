// Package draftspublisher is the drafts-publisher example: a pipeline that
// consumes inputs ([pipeline.inputs], claim = "oldest_ready"), the drafts
// editors add with `starter input add`; a cron schedule of four slots a day
// in America/New_York with jitter; a cap of three episodes a day; an exec
// step (the render-draft program in ./render-draft) that renders the
// claimed draft's payload into a post; and an effect step that publishes it
// at an HTTP downstream at most once, naming the draft. pipelines.toml is
// the example, run by allot's own worker; README.md says how; the test runs
// it end to end on the embedded Temporal server: slots racing for drafts,
// a day without ready drafts, and the cap across backfills.
package draftspublisher
