package allot

import (
	"strings"
	"testing"
)

// TestCheckCurrencyAcceptsISO4217Only: a code is accepted only if ISO 4217
// lists it (with a minor unit); a typo is refused with the fix.
func TestCheckCurrencyAcceptsISO4217Only(t *testing.T) {
	for _, code := range []string{"USD", "EUR", "JPY", "KWD", "CLF", "CHF", "XCG"} {
		if err := CheckCurrency(code); err != nil {
			t.Errorf("%s: %v", code, err)
		}
	}
	for code, fix := range map[string]string{
		"XYZ": `e.g. "USD"`, "ABC": `e.g. "USD"`, "US": `e.g. "USD"`, "": `e.g. "USD"`, "USDD": `e.g. "USD"`,
		"HRK": `e.g. "USD"`,
		"usd": `uppercase, "USD"`, "Eur": `uppercase, "EUR"`,
	} {
		err := CheckCurrency(code)
		if err == nil || !strings.Contains(err.Error(), "is not an ISO 4217 code") || !strings.Contains(err.Error(), fix) {
			t.Errorf("CheckCurrency(%q) = %v, want a refusal naming %q", code, err, fix)
		}
	}
	// ISO 4217 codes without a minor unit are refused as such, never
	// called "not an ISO 4217 code".
	for code, what := range map[string]string{"XAU": "gold", "XAG": "silver", "XDR": "special drawing right", "XTS": "testing", "XXX": "no currency"} {
		err := CheckCurrency(code)
		if err == nil || strings.Contains(err.Error(), "is not an ISO 4217 code") || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), "has no minor unit") || !strings.Contains(err.Error(), `e.g. "USD"`) {
			t.Errorf("CheckCurrency(%q) = %v, want a refusal saying it is %s's code, without a minor unit", code, err, what)
		}
	}
}
