package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// Issue 38 §4: values the file took without a word, and each refusal's
// fix applied to the file parses.
func TestSettingsThatMeanNothingAreRefusedWithTheirFix(t *testing.T) {
	const step = "\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"
	for name, c := range map[string]struct {
		settings, stepSettings, want, fixed, fixedStep string
	}{
		// 25 hours is no time of day: Saturday 01:00, or a typo for 4d5h?
		"deadline hours past a day": {settings: `deadline = "4d25h"`, want: `deadline "4d25h": "25h" is not a time of day (0h to 23h59m59s): write the whole days before the "d", e.g. "5d1h"`,
			fixed: `deadline = "5d1h"`},
		"deadline in hours only": {settings: `deadline = "30h"`, want: `e.g. "1d6h"`, fixed: `deadline = "1d6h"`},
		// 0 was read as "the default" while -1 was refused.
		"no episodes by the deadline": {settings: "deadline = \"4d9h\"\ndeadline_episodes = 0", want: "deadline_episodes = 0: a period needs at least one completed episode",
			fixed: `deadline = "4d9h"`},
		"a batch of no items": {stepSettings: "batch = true\nbatch_max_items = 0", want: `step "s": batch_max_items = 0: a batch closes at 1 to 50000 items`,
			fixedStep: "batch = true"},
		// The warning would come before the period starts.
		"warning before the period": {settings: "deadline = \"4d9h\"\nwarn_before = \"200h\"", want: `warn_before "200h" is longer than the deadline "4d9h", 105h0m0s after the period's start: the warning would come before the period begins; give warn_before = "105h" or less`,
			fixed: "deadline = \"4d9h\"\nwarn_before = \"105h\""},
		// The period would be due while a batch still collects items.
		"batch waits past the deadline": {settings: `deadline = "9h"`, stepSettings: "batch = true\nbatch_max_wait = \"12h\"",
			want: `step "s": batch_max_wait "12h" is longer than the pipeline's deadline "9h", 9h0m0s after the period's start`, fixed: `deadline = "9h"`, fixedStep: "batch = true\nbatch_max_wait = \"9h\""},
		"batch's default wait past the deadline": {settings: `deadline = "30m"`, stepSettings: "batch = true",
			want: `batch_max_wait (by default 1h0m0s) is longer than the pipeline's deadline "30m"`, fixed: `deadline = "30m"`, fixedStep: "batch = true\nbatch_max_wait = \"30m\""},
	} {
		t.Run(name, func(t *testing.T) {
			file := func(settings, stepSettings string) string {
				return "[[pipeline]]\nname = \"p\"\n" + settings + step + stepSettings + "\n"
			}
			_, err := Parse([]byte(file(c.settings, c.stepSettings)), "test")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if _, err := Parse([]byte(file(c.fixed, c.fixedStep)), "test"); err != nil {
				t.Fatalf("the fix does not parse: %v", err)
			}
		})
	}
}

// Issue 38 §4: a value of the wrong type is said in the file's words: the
// setting, its line, what it takes and an example that parses in its place.
func TestTypeErrorsSayTheSettingWhatItTakesAndAnExample(t *testing.T) {
	const base = `[[vendor]]
name        = "v"
url         = "https://api.v.example"
api_key_env = "V_KEY"
rate        = 2.0

[[pipeline]]
name     = "first"
deadline = "4d9h"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "v"
  batch  = true

[[pipeline]]
name     = "second"
deadline = "4d9h"
  [[pipeline.step]]
  name = "cover"
  kind = "paid"
`
	if _, err := Parse([]byte(base), "base.toml"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want, example string }{
		// The second pipeline's deadline: line 18, not the first's.
		"deadline = 4": {"name     = \"second\"\ndeadline = \"4d9h\"", "name     = \"second\"\ndeadline = 4",
			`pipeline file base.toml: line 18: deadline (in [[pipeline]]) takes a string in double quotes, e.g. deadline = "4d9h" (pipeline/pipelines.toml documents it); the file gives it 4, a whole number`,
			`deadline = "4d9h"`},
		`batch = "yes"`: {"batch  = true", `batch  = "yes"`,
			`line 14: batch (in [[pipeline.step]]) takes true or false, without quotes, e.g. batch = true`, "batch = true"},
		`rate = "fast"`: {"rate        = 2.0", `rate        = "fast"`,
			`line 5: rate (in [[vendor]]) takes a number, without quotes, e.g. rate = 2.0 (pipeline/pipelines.toml documents it); the file gives it "fast", a string`, "rate = 2.0"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(base, c.from, c.to, 1)
			_, err := Parse([]byte(bad), "base.toml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			// The example, in place of the bad value, parses.
			badLine := c.to[strings.LastIndex(c.to, "\n")+1:]
			fixed := strings.Replace(bad, badLine, c.example, 1)
			if _, err := Parse([]byte(fixed), "base.toml"); err != nil {
				t.Fatalf("the example %s does not parse: %v", c.example, err)
			}
		})
	}
}

// Every setting's type error can give an example: pipeline/pipelines.toml
// documents a value of the right type for each, under its table.
func TestPipelinesTomlDocumentsEverySetting(t *testing.T) {
	for _, s := range fileSettings {
		k := s.typ.Kind()
		if k == reflect.Struct || k == reflect.Slice && s.typ.Elem().Kind() == reflect.Struct {
			continue // a table
		}
		key := strings.TrimPrefix(s.table+"."+s.name, ".")
		ex, ok := documentedExamples[key]
		if !ok {
			t.Errorf("pipeline/pipelines.toml gives no example of %s in %s", s.name, tableTitle(s.table))
			continue
		}
		want := map[reflect.Kind][]string{reflect.String: {"string"}, reflect.Bool: {"bool"}, reflect.Int: {"int64"}, reflect.Int64: {"int64"},
			reflect.Float64: {"float64", "int64"}, reflect.Slice: {"[]any"}, reflect.Map: {"map[string]any"}}[k]
		if got := literalType(ex); !strings.Contains(strings.Join(want, " "), got) || got == "" {
			t.Errorf("pipeline/pipelines.toml's example of %s is %s, which is not %s", key, ex, what(s.typ))
		}
	}
}

// Issue 38 §4: a setting written in another table than its own says where
// it belongs; a misspelt one, the setting it was likely meant to be. Each
// moved where the message says parses.
func TestMisplacedSettingsSayWhereTheyBelong(t *testing.T) {
	const vendor = `[[vendor]]
name = "v"
url = "https://api.v.example"
api_key_env = "V_KEY"
%VENDOR%
`
	const pipe = `[[pipeline]]
name = "p"
%PIPELINE%
  [[pipeline.step]]
  name   = "s"
  kind   = "paid"
  vendor = "v"
  batch  = true
%STEP%
`
	file := func(v, p, s string) string {
		r := strings.NewReplacer("%VENDOR%", v, "%PIPELINE%", p, "%STEP%", s)
		return r.Replace(vendor + pipe)
	}
	for name, c := range map[string]struct{ bad, want, fixed string }{
		"a vendor's batch setting on the step": {file("", "", `batch_poll_every = "1m"`),
			`unknown key pipeline.step.batch_poll_every (line 14): batch_poll_every is a setting of [[vendor]], not of [[pipeline.step]]: move it there (the [[vendor]] the batch step names`,
			file(`batch_poll_every = "1m"`, "", "")},
		"a step's batch setting on the vendor": {file("batch_max_items = 50", "", ""),
			`unknown key vendor.batch_max_items (line 5): batch_max_items is a setting of [[pipeline.step]], not of [[vendor]]: move it there (the paid step sent in batches, beside its batch = true)`,
			file("", "", "batch_max_items = 50")},
		// TOML reads a key below [vendor.activities] as that table's.
		"below [vendor.activities]": {strings.Replace(file("", "", ""), `api_key_env = "V_KEY"`, "api_key_env = \"V_KEY\"\n  [vendor.activities]\n  batch_list_lag = \"2m\"", 1),
			`unknown key vendor.activities.batch_list_lag (line 6): batch_list_lag is a setting of [[vendor]], and TOML reads every key below the [vendor.activities] header as that table's: move it above the [vendor.activities] line`,
			file(`batch_list_lag = "2m"`, "", "")},
		"misspelt": {file("", `periodd = "day"`, ""), `unknown key pipeline.periodd (line 8): [[pipeline]] has no setting periodd: did you mean period?`,
			file("", `period = "day"`, "")},
		"nothing near": {file("", `colour = "blue"`, ""), `[[pipeline]] has no setting colour; its settings are auto_approve, deadline,`, file("", "", "")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.bad), "test")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %q", err, c.want)
			}
			if _, err := Parse([]byte(c.fixed), "test"); err != nil {
				t.Fatalf("moved where the message says, it does not parse: %v", err)
			}
		})
	}
}
