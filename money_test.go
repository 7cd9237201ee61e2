package allot

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestMoneyPrintsMajorUnits: every amount prints exactly in its currency's
// major units, whatever its sign and size (a negative amount was once
// printed "-4467440737095516.-16").
func TestMoneyPrintsMajorUnits(t *testing.T) {
	for _, c := range []struct {
		m    Money
		want string
	}{
		{Money{250, "USD"}, "2.50 USD"},
		{Money{0, "USD"}, "0.00 USD"},
		{Money{5, "USD"}, "0.05 USD"},
		{Money{-16, "USD"}, "-0.16 USD"},
		{Money{-250, "EUR"}, "-2.50 EUR"},
		{Money{-4467440737095516_16, "USD"}, "-4467440737095516.16 USD"},
		{Money{math.MaxInt64, "USD"}, "92233720368547758.07 USD"},
		{Money{math.MinInt64, "USD"}, "-92233720368547758.08 USD"},
		{Money{MaxAmount, "USD"}, "10000000000.00 USD"},
		{Money{500, "JPY"}, "500 JPY"},
		{Money{-7, "JPY"}, "-7 JPY"},
		{Money{1250, "KWD"}, "1.250 KWD"},
		{Money{-5, "BHD"}, "-0.005 BHD"},
		{Money{12345, "CLF"}, "1.2345 CLF"},
		{Money{123, "XYZ"}, "1.23 XYZ"}, // unknown: two decimals
		{Money{250, ""}, "2.50"},
	} {
		got := c.m.String()
		if got != c.want {
			t.Errorf("Money{%d, %q} = %q, want %q", c.m.Amount, c.m.Currency, got, c.want)
		}
		if strings.Contains(got, "-.") || strings.Contains(got, ".-") || strings.Count(got, "-") > 1 {
			t.Errorf("Money{%d, %q} = %q: a sign inside the number", c.m.Amount, c.m.Currency, got)
		}
	}
}

// TestMoneySumsRefuseOverflow: a sum that leaves int64 is an error, never
// a wrapped number; amounts of two currencies do not add.
func TestMoneySumsRefuseOverflow(t *testing.T) {
	if _, err := AddAmount(math.MaxInt64, 1); !errors.Is(err, ErrAmountOverflow) {
		t.Errorf("MaxInt64 + 1: %v, want ErrAmountOverflow", err)
	}
	if _, err := AddAmount(math.MinInt64, -1); !errors.Is(err, ErrAmountOverflow) {
		t.Errorf("MinInt64 - 1: %v, want ErrAmountOverflow", err)
	}
	if s, err := AddAmount(math.MaxInt64, math.MinInt64); err != nil || s != -1 {
		t.Errorf("MaxInt64 + MinInt64 = %d, %v; want -1", s, err)
	}
	if _, err := (Money{1, "USD"}).Add(Money{1, "EUR"}); !errors.Is(err, ErrCurrencyMismatch) {
		t.Errorf("USD + EUR: %v, want ErrCurrencyMismatch", err)
	}
	if s, err := (Money{250, "USD"}).Add(Money{40, "USD"}); err != nil || s != (Money{290, "USD"}) {
		t.Errorf("2.50 + 0.40 USD = %v, %v", s, err)
	}
	totals := map[string]int64{"USD": math.MaxInt64 - 1}
	if err := AddTo(totals, Money{1, "USD"}); err != nil || totals["USD"] != math.MaxInt64 {
		t.Fatalf("AddTo to the limit: %v, %v", totals, err)
	}
	if err := AddTo(totals, Money{1, "USD"}); !errors.Is(err, ErrAmountOverflow) || totals["USD"] != math.MaxInt64 {
		t.Errorf("AddTo past the limit: %v, %v; want ErrAmountOverflow and the total unchanged", totals, err)
	}
	// The bound per entry leaves room for millions of entries.
	if n := math.MaxInt64 / MaxAmount; n < 9_000_000 {
		t.Errorf("only %d entries at MaxAmount fit int64", n)
	}
}

func TestAllocationKeyIsTheSchedulesForm(t *testing.T) {
	at := time.Date(2026, 7, 13, 4, 0, 0, 999_000_000, time.FixedZone("CEST", 2*3600))
	if got := AllocationKey("weekly-video", at); got != "weekly-video/scheduled-2026-07-13T02:00:00Z" {
		t.Errorf("AllocationKey = %q", got)
	}
}

// TestISO4217Table: the table holds the common codes with their minor
// units and nothing that is not a three-letter uppercase code.
func TestISO4217Table(t *testing.T) {
	for code, digits := range map[string]int{"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "KRW": 0, "KWD": 3, "CLF": 4} {
		if !IsISO4217(code) || CurrencyDigits(code) != digits {
			t.Errorf("%s: known %v, %d digits; want known, %d", code, IsISO4217(code), CurrencyDigits(code), digits)
		}
	}
	for _, code := range []string{"XYZ", "usd", "US", "", "XAU", "XXX"} {
		if IsISO4217(code) {
			t.Errorf("%q is taken for an ISO 4217 code", code)
		}
	}
	for code := range currencyDigits {
		if len(code) != 3 || strings.ToUpper(code) != code {
			t.Errorf("table entry %q is not a three-letter uppercase code", code)
		}
	}
}
