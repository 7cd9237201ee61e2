// Package bench holds allot's performance benchmarks that need a Temporal
// server: allot's runs end to end against a bare Temporal workflow pair,
// allot's ledger allocation against an allocator kept in a Temporal
// workflow's state, a 2,000-time backfill through a real Schedule, the
// worker process's memory, and what one run costs in Temporal Cloud's
// actions, counted from saved histories (the one benchmark here that needs
// no server once TestSaveActionHistories has saved them). Each prints its figures beside a baseline
// measured in the same run on the same server and database; none asserts a
// timing. README-perf.md lists the figures, their last values and the
// command that reproduces each.
//
// The package has no code outside its tests: it links the Temporal server,
// so nothing else may import it.
package bench
