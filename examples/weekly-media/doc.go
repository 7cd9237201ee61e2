// Package weeklymedia is the weekly-media example: a weekly video from one
// paid vendor and its cover image from another, each an http [[vendor]]
// with its own URL and API key variable, then assemble, an operator's
// approval and publish. It has no code of its own: pipelines.toml is the
// example, run by allot's own worker, and README.md says how; the test
// runs it end to end on the embedded Temporal server.
package weeklymedia
