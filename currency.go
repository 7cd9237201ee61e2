package allot

import "strings"

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
