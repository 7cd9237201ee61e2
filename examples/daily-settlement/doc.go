// Package dailysettlement is the daily-settlement example: a day period in
// Europe/Berlin shifted by period_offset = "-1d", so that the run at 00:05
// settles the business date before; an exec step (the settle program in
// ./settle) that recomputes the date's total in SQLite; and an effect step
// that notifies a downstream at most once. pipelines.toml is the example,
// run by allot's own worker; README.md says how; the test runs it end to
// end on the embedded Temporal server.
package dailysettlement
