package paidvendor

// MaxErrorBody exposes the bound on a kept error body to the external tests.
const MaxErrorBody = maxErrorBody
