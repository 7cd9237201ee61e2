package allot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Money is an exact amount: minor units (cents for USD) of an ISO 4217
// currency. There are no floats anywhere money is kept, summed or printed.
type Money struct {
	Amount   int64  `json:"amount" toml:"amount"`
	Currency string `json:"currency" toml:"currency"`
}

// MaxAmount bounds one cost entry: 10^12 minor units (ten billion dollars
// in cents). Far above any real charge, and far below int64's limit: over
// nine million entries at the bound still sum without overflow. The ledger
// and the import refuse an amount above it.
const MaxAmount int64 = 1_000_000_000_000

// ErrAmountOverflow means a sum of amounts left int64's range. The sum is
// refused, never wrapped into a wrong number.
var ErrAmountOverflow = errors.New("amount overflow")

// ErrCurrencyMismatch means amounts of two currencies were added.
var ErrCurrencyMismatch = errors.New("currencies differ")

// String formats the amount in major units with its currency: "2.50 USD",
// "-0.16 USD", "500 JPY", "1.250 KWD". It is the one formatter of money:
// every command prints amounts through it. A Money without a currency
// prints its number alone.
func (m Money) String() string {
	if m.Currency == "" {
		return m.Decimal()
	}
	return m.Decimal() + " " + m.Currency
}

// Decimal is the amount alone in major units, with its currency's
// decimals and no grouping ("2.50", "-0.16", "500", "1.250"): String's
// number, for formats that keep the currency apart (a form's box, a CSV
// column).
func (m Money) Decimal() string {
	digits := CurrencyDigits(m.Currency)
	// The magnitude as unsigned, so that the most negative int64 has one.
	mag := uint64(m.Amount)
	sign := ""
	if m.Amount < 0 {
		mag, sign = -mag, "-"
	}
	s := strconv.FormatUint(mag, 10)
	if digits > 0 {
		if len(s) <= digits {
			s = strings.Repeat("0", digits-len(s)+1) + s
		}
		s = s[:len(s)-digits] + "." + s[len(s)-digits:]
	}
	return sign + s
}

// Add returns m + n. Both must have the same currency (ErrCurrencyMismatch),
// and the sum must fit an int64 (ErrAmountOverflow).
func (m Money) Add(n Money) (Money, error) {
	if m.Currency != n.Currency {
		return m, fmt.Errorf("%w: %s + %s: add amounts of one currency only", ErrCurrencyMismatch, m, n)
	}
	sum, err := AddAmount(m.Amount, n.Amount)
	if err != nil {
		return m, fmt.Errorf("%s + %s: %w", m, n, err)
	}
	return Money{Amount: sum, Currency: m.Currency}, nil
}

// AddAmount adds two amounts in minor units of one currency, refusing a
// sum that leaves int64's range (ErrAmountOverflow) instead of wrapping it.
func AddAmount(a, b int64) (int64, error) {
	sum := a + b
	// Overflow only when both have the sign the sum lacks.
	if a > 0 && b > 0 && sum < 0 || a < 0 && b < 0 && sum >= 0 {
		return 0, fmt.Errorf("%w: %d + %d minor units leaves the range of 64 bits", ErrAmountOverflow, a, b)
	}
	return sum, nil
}

// AddAmounts adds amounts of one currency, refusing an overflow
// (ErrAmountOverflow) instead of wrapping around.
func AddAmounts(xs ...int64) (int64, error) {
	var sum int64
	for _, x := range xs {
		var err error
		if sum, err = AddAmount(sum, x); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// AddTo adds amount to totals[currency], refusing an overflow and leaving
// totals unchanged then. It is how every per-currency total is summed.
func AddTo(totals map[string]int64, m Money) error {
	sum, err := AddAmount(totals[m.Currency], m.Amount)
	if err != nil {
		return fmt.Errorf("the total in %s: %w", m.Currency, err)
	}
	totals[m.Currency] = sum
	return nil
}
