package pipeline

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"allot"
)

// The pipeline file's mistakes that the TOML decoder reports in its own
// terms (Go types, key paths) are said here in the file's: the setting,
// its line, what it takes, an example from pipeline/pipelines.toml, and
// where a setting written in the wrong table belongs.

// setting is one key of the pipeline file: the table it is written in
// ("pipeline.step", "" for the top), its name and what it holds.
type setting struct {
	table, name string
	typ         reflect.Type
}

// fileSettings are every setting of the file, read from the types the
// file decodes into; arrayTables are the tables written [[...]].
var fileSettings, arrayTables = readSettings()

func readSettings() ([]setting, map[string]bool) {
	var out []setting
	arrays := map[string]bool{}
	var walk func(t reflect.Type, table string)
	walk = func(t reflect.Type, table string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if f.Anonymous && name == "" {
				walk(f.Type, table) // VendorLimits, VendorBill, VendorBatch
				continue
			}
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, setting{table: table, name: name, typ: ft})
			inner := strings.TrimPrefix(table+"."+name, ".")
			switch {
			case ft.Kind() == reflect.Struct:
				walk(ft, inner)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				arrays[inner] = true
				walk(ft.Elem(), inner)
			}
		}
	}
	walk(reflect.TypeOf(file{}), "")
	return out, arrays
}

// settingAt is the setting a decoder key path names ("pipeline.step.batch").
func settingAt(path string) (setting, bool) {
	table, name := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		table, name = path[:i], path[i+1:]
	}
	for _, s := range fileSettings {
		if s.table == table && s.name == name {
			return s, true
		}
	}
	return setting{}, false
}

// tableTitle is a table as the file writes its header: [[pipeline.step]],
// [pipeline.schedule]; the top of the file for "".
func tableTitle(table string) string {
	switch {
	case table == "":
		return "the top of the file"
	case arrayTables[table]:
		return "[[" + table + "]]"
	}
	return "[" + table + "]"
}

// what says what a setting of type t takes, in the file's words.
func what(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string in double quotes"
	case reflect.Bool:
		return "true or false, without quotes"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, without quotes"
	case reflect.Float32, reflect.Float64:
		return "a number, without quotes"
	case reflect.Slice:
		return "a list in brackets of " + strings.TrimPrefix(what(t.Elem()), "a ")
	case reflect.Map:
		return "a table of names and strings"
	}
	return "a table"
}

// tomlValue names the decoder's type of a value written in the file.
var tomlValue = map[string]string{
	"int64": "a whole number", "float64": "a number", "string": "a string", "bool": "true or false",
	"time.Time": "a date and time", "[]any": "a list", "map[string]any": "a table",
}

// documentedExamples are the values pipeline/pipelines.toml gives each
// setting, in its settings or its comments, by table and name
// ("pipeline.step.batch"); the first one written wins. A table's header,
// commented or not, starts its settings.
var documentedExamples = func() map[string]string {
	out := map[string]string{}
	header := regexp.MustCompile(`^[\s#]*\[\[?([a-z_.]+)\]\]?`)
	lit := regexp.MustCompile(`(?:^|[\s#,{])([a-z_]+)\s*=\s*("[^"]*"|\[[^\]]*\]|\{[^}]*\}|true\b|false\b|-?[0-9][0-9._]*)`)
	var scan func(table, text string)
	scan = func(table, text string) {
		for _, m := range lit.FindAllStringSubmatch(text, -1) {
			key := strings.TrimPrefix(table+"."+m[1], ".")
			if _, ok := out[key]; !ok {
				out[key] = m[2]
			}
			if strings.HasPrefix(m[2], "{") && m[1] != "params" {
				scan(key, strings.Trim(m[2], "{}")) // money's amount and currency
			}
		}
	}
	table := ""
	for _, line := range strings.Split(string(DefaultConfig), "\n") {
		if h := header.FindStringSubmatch(line); h != nil {
			table = h[1]
		}
		scan(table, line)
	}
	return out
}()

// typeErrorText matches the decoder's type error: "toml: line 7 (last key
// "pipeline.deadline"): incompatible types: TOML value has type int64;
// destination has type string".
var typeErrorText = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]+)"\): incompatible types: TOML value has type (\S+);`)

// explainTypeError says which setting has a value of the wrong type, on
// which line, what it takes and an example; any other error is returned as
// it is.
func explainTypeError(data []byte, source string, err error) error {
	m := typeErrorText.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	s, ok := settingAt(m[2])
	if !ok {
		return err
	}
	lineNo, _ := strconv.Atoi(m[1])
	given := tomlValue[m[3]]
	if given == "" {
		given = "a value of another type"
	}
	// The decoder's line is where the key was last met; the culprit is
	// the first line that sets it to a value of that type.
	written := ""
	if n, v, found := assignmentOf(data, s.name, m[3]); found {
		lineNo, written = n, v+", "
	}
	example := documentedExamples[strings.TrimPrefix(s.table+"."+s.name, ".")]
	if example == "" {
		example = map[reflect.Kind]string{reflect.String: `"..."`, reflect.Bool: "true", reflect.Int: "1", reflect.Float64: "1.5"}[s.typ.Kind()]
	}
	fix := ""
	if example != "" {
		fix = fmt.Sprintf(", e.g. %s = %s (pipeline/pipelines.toml documents it)", s.name, example)
	}
	return fmt.Errorf("pipeline file %s: line %d: %s (in %s) takes %s%s; the file gives it %s%s",
		source, lineNo, s.name, tableTitle(s.table), what(s.typ), fix, written, given)
}

// assignmentOf finds the first line of data that sets a key called name
// to a value of the decoder's type tomlType: its number and the value as
// written.
func assignmentOf(data []byte, name, tomlType string) (int, string, bool) {
	assign := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(name) + `\s*=\s*(.*)$`)
	for i, line := range strings.Split(string(data), "\n") {
		m := assign.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v := strings.TrimSpace(m[1])
		if j := strings.Index(v, " #"); j >= 0 && !strings.HasPrefix(v, `"`) {
			v = strings.TrimSpace(v[:j])
		}
		if literalType(v) == tomlType {
			return i + 1, v, true
		}
	}
	return 0, "", false
}

var (
	floatLit = regexp.MustCompile(`^[-+]?[0-9_]+(\.[0-9_]+)?([eE][-+]?[0-9_]+)?$|^[-+]?(inf|nan)$`)
	dateLit  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)
)

// literalType is the decoder's type of a value as written on one line.
func literalType(v string) string {
	switch {
	case strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "'"):
		return "string"
	case v == "true" || v == "false":
		return "bool"
	case strings.HasPrefix(v, "["):
		return "[]any"
	case strings.HasPrefix(v, "{"):
		return "map[string]any"
	case dateLit.MatchString(v):
		return "time.Time"
	case integerLit.MatchString(v) || strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0o") || strings.HasPrefix(v, "0b"):
		return "int64"
	case floatLit.MatchString(v):
		return "float64"
	}
	return ""
}

// explainUnknownKey says of a key no setting of its table has where it
// belongs (a setting of another table, most often written below a
// sub-table's header, which TOML reads as the sub-table's), or which
// setting of its table it was most likely meant to be.
func explainUnknownKey(data []byte, k toml.Key) string {
	table, name := strings.Join(k[:len(k)-1], "."), k[len(k)-1]
	at := ""
	if n, found := assignmentAnyOf(data, name); found {
		at = fmt.Sprintf(" (line %d)", n)
	}
	var elsewhere []string
	for _, s := range fileSettings {
		if s.name == name && s.table != table {
			elsewhere = append(elsewhere, s.table)
		}
	}
	if len(elsewhere) > 0 {
		home := elsewhere[0]
		if slices.Contains(elsewhere, parentTable(table)) {
			// Written below [vendor.activities] (or [pipeline.schedule],
			// ...) but meant for the table above.
			return fmt.Sprintf("%s%s: %s is a setting of %s, and TOML reads every key below the %s header as that table's: move it above the %s line",
				k, at, name, tableTitle(parentTable(table)), tableTitle(table), tableTitle(table))
		}
		return fmt.Sprintf("%s%s: %s is a setting of %s, not of %s: move it there%s",
			k, at, name, tableTitle(home), tableTitle(table), belongsHint(name, home))
	}
	var known []string
	for _, s := range fileSettings {
		if s.table == table {
			known = append(known, s.name)
		}
	}
	if near, ok := allot.Nearest(name, known); ok {
		return fmt.Sprintf("%s%s: %s has no setting %s: did you mean %s?", k, at, tableTitle(table), name, near)
	}
	slices.Sort(known)
	return fmt.Sprintf("%s%s: %s has no setting %s; its settings are %s", k, at, tableTitle(table), name, strings.Join(known, ", "))
}

// belongsHint adds what a setting written in the wrong table is for, where
// its home is not plain from the table's name.
func belongsHint(name, home string) string {
	switch {
	case home == "pipeline.step" && strings.HasPrefix(name, "batch"):
		return " (the paid step sent in batches, beside its batch = true)"
	case home == "vendor" && strings.HasPrefix(name, "batch"):
		return " (the [[vendor]] the batch step names, or the one named \"default\" for a step that names none)"
	}
	return ""
}

func parentTable(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[:i]
	}
	return ""
}

// assignmentAnyOf finds the first line of data that sets a key called name.
func assignmentAnyOf(data []byte, name string) (int, bool) {
	assign := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(name) + `\s*=`)
	for i, line := range strings.Split(string(data), "\n") {
		if assign.MatchString(line) {
			return i + 1, true
		}
	}
	return 0, false
}

// explicitZeros refuses a count written as 0 where 0 is no count at all:
// deadline_episodes (a period needs at least one episode) and
// batch_max_items (a batch at least one item). Left out, each has its
// default; the decoder gives 0 for both, so the file is read again for
// what is written.
func explicitZeros(data []byte) error {
	var written struct {
		Pipeline []struct {
			Name             string `toml:"name"`
			DeadlineEpisodes *int64 `toml:"deadline_episodes"`
			Step             []struct {
				Name          string `toml:"name"`
				BatchMaxItems *int64 `toml:"batch_max_items"`
			} `toml:"step"`
		} `toml:"pipeline"`
	}
	if _, err := toml.Decode(string(data), &written); err != nil {
		return nil // the file decoded once: this cannot fail differently
	}
	for _, p := range written.Pipeline {
		if n := p.DeadlineEpisodes; n != nil && *n == 0 {
			return fmt.Errorf("pipeline %q: deadline_episodes = 0: a period needs at least one completed episode by its deadline; write how many (1 or more), or leave it out for 1", p.Name)
		}
		for _, s := range p.Step {
			if n := s.BatchMaxItems; n != nil && *n == 0 {
				return fmt.Errorf("pipeline %q: step %q: batch_max_items = 0: a batch closes at 1 to %d items; write how many, or leave it out for %d", p.Name, s.Name, MaxBatchItems, DefaultBatchMaxItems)
			}
		}
	}
	return nil
}
