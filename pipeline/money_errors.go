package pipeline

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"allot"
)

// moneyKeys are the settings of the pipeline file that hold money.
var moneyKeys = map[string]bool{"limit": true, "max_cost": true}

var (
	amountLit   = regexp.MustCompile(`\bamount\s*=\s*([-+0-9._eE]+)`)
	currencyLit = regexp.MustCompile(`\bcurrency\s*=\s*["']([^"']*)["']`)
	integerLit  = regexp.MustCompile(`^[-+]?[0-9_]+$`)
	typeErrorAt = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]+)"\): `)
)

// moneyTypeError explains a TOML type error on a money setting (limit,
// max_cost, or their amount), which the decoder reports in Go's types:
// money is a table of an integer of minor units and a currency, and the
// value written is shown converted when its currency is known. Any other
// error is returned as it is.
func moneyTypeError(data []byte, source string, err error) error {
	// The decoder reports a type error as text ("toml: line N (last key
	// "K"): ..."), a syntax error as a ParseError.
	lineNo, lastKey := 0, ""
	var pe toml.ParseError
	if errors.As(err, &pe) {
		lineNo, lastKey = pe.Position.Line, pe.LastKey
	} else if m := typeErrorAt.FindStringSubmatch(err.Error()); m != nil {
		lineNo, _ = strconv.Atoi(m[1])
		lastKey = m[2]
	}
	if lastKey == "" {
		return err
	}
	parts := strings.Split(lastKey, ".")
	key := parts[len(parts)-1]
	if key == "amount" && len(parts) > 1 {
		key = parts[len(parts)-2]
	}
	if !moneyKeys[key] {
		return err
	}
	// The decoder's line is the key's first in the file (every [[budget]]
	// has a limit): the culprit is the first money setting not written as
	// an integer amount with a currency.
	line := ""
	assign := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(key) + `\s*=`)
	for i, l := range strings.Split(string(data), "\n") {
		if j := strings.Index(l, "#"); j >= 0 {
			l = l[:j]
		}
		if !assign.MatchString(l) {
			continue
		}
		if m := amountLit.FindStringSubmatch(l); m != nil && integerLit.MatchString(m[1]) {
			continue
		}
		line, lineNo = l, i+1
		break
	}
	amount, currency := "", ""
	if m := amountLit.FindStringSubmatch(line); m != nil {
		amount = m[1]
	}
	if m := currencyLit.FindStringSubmatch(line); m != nil {
		currency = m[1]
	}
	if amount == "" {
		// key = 75.5, key = 1000 or key = "75.50 USD"
		if _, v, ok := strings.Cut(line, "="); ok {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			amount, currency, _ = strings.Cut(v, " ")
			currency = strings.TrimSpace(currency)
		}
	}
	amount = strings.ReplaceAll(amount, "_", "")
	shape := `money is { amount = <integer of minor units>, currency = "<ISO 4217 code>" }`
	where := fmt.Sprintf("pipeline file %s: line %d: %s", source, lineNo, lastKey)
	if !allot.IsISO4217(currency) {
		example := "the amount in minor units of its currency (cents for USD, yen for JPY)"
		if minor, ok := minorUnits(amount, 2); ok {
			example += fmt.Sprintf(": %s USD is %s = { amount = %d, currency = \"USD\" }", amount, key, minor)
			if !strings.Contains(amount, ".") {
				example += fmt.Sprintf(", and %s cents is { amount = %s, currency = \"USD\" }", amount, amount)
			}
		}
		return fmt.Errorf("%s: %s, %s", where, shape, example)
	}
	digits := allot.CurrencyDigits(currency)
	minor, ok := minorUnits(amount, digits)
	if !ok {
		return fmt.Errorf("%s: %s: %q is not an amount of %s, which has %d decimals; amounts are whole minor units of it", where, shape, amount, currency, digits)
	}
	return fmt.Errorf("%s: %s: %s %s is %s = { amount = %d, currency = %q }", where, shape, amount, currency, key, minor, currency)
}

// minorUnits converts a decimal amount in major units ("75.5") to minor
// units exactly, or reports false (more decimals than the currency has,
// not a number, negative, out of range).
func minorUnits(amount string, digits int) (int64, bool) {
	whole, frac, _ := strings.Cut(amount, ".")
	if whole == "" || len(frac) > digits || strings.ContainsAny(whole, "+-eE") || strings.ContainsAny(frac, "+-eE") {
		return 0, false
	}
	frac += strings.Repeat("0", digits-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
