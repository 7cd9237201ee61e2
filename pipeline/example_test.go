package pipeline_test

import (
	"fmt"
	"time"

	"allot"
	"allot/pipeline"
)

// A pipeline file is parsed and checked whole: a pipeline's steps, its
// period in its own time zone, and its schedule. Load reads one from a
// path ("" is the embedded default).
func ExampleParse() {
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name      = "daily-report"
period    = "day"
time_zone = "Europe/Berlin"

  [[pipeline.step]]
  name = "plan"
  kind = "local"

  [[pipeline.step]]
  name = "assemble"
  kind = "local"
`), "example.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := set.Get("daily-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(set.Names(), p.StepNames())
	// 23:30 UTC is already the next day in Berlin: the period comes from
	// the pipeline's zone, never the machine's.
	fmt.Println(p.PeriodOf(time.Date(2026, 8, 6, 23, 30, 0, 0, time.UTC)))
	// Output:
	// [daily-report] [plan assemble]
	// 2026-08-07
}

// A typo is refused, never taken for a default: the error names the file,
// the setting and the fix, and is an allot.Error of type InvalidInput.
func ExampleParse_refused() {
	_, err := pipeline.Parse([]byte(`
[[pipeline]]
name   = "daily-report"
perod  = "day"
`), "example.toml")
	fmt.Println(allot.ErrorType(err))
	// Output:
	// InvalidInput
}
