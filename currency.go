package allot

import (
	"fmt"
	"strings"
)

// The active ISO 4217 alphabetic codes (list one), by the exponent of
// their minor unit: the only currencies money may be kept in. Codes
// without a minor unit (gold XAU, special drawing rights XDR, the testing
// code XTS, "no currency" XXX, ...) are left out: an amount is an integer
// of minor units, which they do not have. Withdrawn codes (HRK, ZWL, ANG,
// SLL ...) are left out too; a ledger that recorded one still prints it
// (CurrencyDigits), but no new budget, price or import may name it. BGN
// stays while bills from before Bulgaria's euro (2026) may still settle.
// A code ISO adds later is one word added here.
var iso4217ByDigits = map[int]string{
	0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF",
	2: "AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD " +
		"CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP " +
		"GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT " +
		"LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN " +
		"NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD " +
		"SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS " +
		"VED VES WST XCD XCG YER ZAR ZMW ZWG",
	3: "BHD IQD JOD KWD LYD OMR TND",
	4: "CLF UYW",
}

// iso4217WithoutMinorUnit are the ISO 4217 codes that have no minor unit
// (list one's "N.A."), with what each stands for: money may not be kept
// in them, and a refusal says why.
var iso4217WithoutMinorUnit = map[string]string{
	"XAU": "gold (one troy ounce)", "XAG": "silver (one troy ounce)", "XPT": "platinum (one troy ounce)", "XPD": "palladium (one troy ounce)",
	"XDR": "the IMF's special drawing right", "XSU": "the sucre of ALBA", "XUA": "the African Development Bank's unit of account",
	"XBA": "a European bond market unit", "XBB": "a European bond market unit", "XBC": "a European bond market unit", "XBD": "a European bond market unit",
	"XTS": "the code reserved for testing", "XXX": "the code for no currency",
}

// ISO4217WithoutMinorUnit says what an ISO 4217 code with no minor unit
// stands for ("gold (one troy ounce)" for XAU); ok is false for any other
// code.
func ISO4217WithoutMinorUnit(code string) (string, bool) {
	what, ok := iso4217WithoutMinorUnit[code]
	return what, ok
}

// currencyDigits is iso4217ByDigits by code.
var currencyDigits = func() map[string]int {
	out := map[string]int{}
	for digits, codes := range iso4217ByDigits {
		for _, c := range strings.Fields(codes) {
			out[c] = digits
		}
	}
	return out
}()

// IsISO4217 reports whether code is an active ISO 4217 currency code with
// a minor unit: "USD", "JPY", "KWD"; not "usd", "US" or "XYZ".
func IsISO4217(code string) bool {
	_, ok := currencyDigits[code]
	return ok
}

// CurrencyDigits is how many decimals a currency's major unit has: 0 for
// JPY, 3 for KWD, 2 for USD, and 2 for a code not in ISO 4217 (which only
// a ledger written before the codes were checked can hold).
func CurrencyDigits(currency string) int {
	if d, ok := currencyDigits[currency]; ok {
		return d
	}
	return 2
}

// CheckCurrency refuses a code that is not an active ISO 4217 currency
// with a minor unit (IsISO4217): a typo such as "XYZ" or "usd" would
// otherwise open a currency of its own, whose amounts no budget or cost in
// the real one ever meets; a code without a minor unit (gold, XAU) has no
// whole amounts to count. Imports check their currencies with it too.
func CheckCurrency(code string) error {
	if IsISO4217(code) {
		return nil
	}
	if up := strings.ToUpper(strings.TrimSpace(code)); up != code && IsISO4217(up) {
		return fmt.Errorf("currency %q is not an ISO 4217 code: write it in uppercase, %q", code, up)
	}
	if what, ok := ISO4217WithoutMinorUnit(code); ok {
		return fmt.Errorf("currency %q is ISO 4217's code for %s, which has no minor unit: allot keeps money as a whole number of a currency's minor units (cents for USD), so it takes the ISO 4217 currencies that have one; write the code of the currency the vendor bills in, e.g. \"USD\", \"EUR\" or \"JPY\"", code, what)
	}
	return fmt.Errorf("currency %q is not an ISO 4217 code: write the active three-letter code of the currency, e.g. \"USD\", \"EUR\" or \"JPY\"", code)
}
