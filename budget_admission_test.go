package allot

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestBudgetAdmission: a task fits when settled + reserved + asked is at
// most the limit, to the minor unit; a sum beyond int64 fits nothing, and
// the limit it needs saturates instead of wrapping.
func TestBudgetAdmission(t *testing.T) {
	for _, c := range []struct {
		name         string
		spend        BudgetSpend
		limit, asked int64
		admits       bool
		needed       int64
	}{
		{"empty period", BudgetSpend{}, 500, 500, true, 500},
		{"exactly full", BudgetSpend{Settled: 200, Reserved: 100}, 500, 200, true, 500},
		{"one minor unit over", BudgetSpend{Settled: 200, Reserved: 100}, 500, 201, false, 501},
		{"reservations count", BudgetSpend{Reserved: 500}, 500, 1, false, 501},
		{"settled costs count", BudgetSpend{Settled: 500}, 500, 1, false, 501},
		{"nothing asked of a full period", BudgetSpend{Settled: 300, Reserved: 200}, 500, 0, true, 500},
		{"nothing asked of an overrun period", BudgetSpend{Settled: 501}, 500, 0, false, 501},
		{"a sum beyond int64", BudgetSpend{Settled: math.MaxInt64, Reserved: 1}, math.MaxInt64, 0, false, MaxBudgetLimit},
		{"an ask beyond int64", BudgetSpend{Settled: 1}, MaxBudgetLimit, math.MaxInt64, false, MaxBudgetLimit},
	} {
		if got := c.spend.Admits(c.limit, c.asked); got != c.admits {
			t.Errorf("%s: %+v admits %d under %d: %v, want %v", c.name, c.spend, c.asked, c.limit, got, c.admits)
		}
		if got := c.spend.Needed(c.asked); got != c.needed {
			t.Errorf("%s: %+v needs a limit of %d for %d, want %d", c.name, c.spend, got, c.asked, c.needed)
		}
	}
	if total, err := (BudgetSpend{Settled: 3, Reserved: 4}).Total(); err != nil || total != 7 {
		t.Errorf("Total = %d, %v; want 7", total, err)
	}
	if _, err := (BudgetSpend{Settled: math.MaxInt64, Reserved: 1}).Total(); err == nil {
		t.Error("a total beyond int64 is not refused")
	}
}

// TestAsksBeyondHeld: a task asks only what rises above what it holds in
// the same budget, period and currency; what fits in it asks nothing.
func TestAsksBeyondHeld(t *testing.T) {
	ask := func(budget, period, cur string, amount int64) Reservation {
		return Reservation{Budget: budget, Period: period, Currency: cur, Limit: 1000, Amount: amount}
	}
	for _, c := range []struct {
		name     string
		rs, held []Reservation
		want     []Reservation
	}{
		{"nothing held", []Reservation{ask("b", "w1", "USD", 300)}, nil, []Reservation{ask("b", "w1", "USD", 300)}},
		{"a rise above the reservation", []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 200)}, []Reservation{ask("b", "w1", "USD", 100)}},
		{"the reservation itself", []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 300)}, nil},
		{"a lower quote", []Reservation{ask("b", "w1", "USD", 250)}, []Reservation{ask("b", "w1", "USD", 300)}, nil},
		{"another period", []Reservation{ask("b", "w2", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("b", "w2", "USD", 300)}},
		{"another budget", []Reservation{ask("c", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("c", "w1", "USD", 300)}},
		{"another currency", []Reservation{ask("b", "w1", "EUR", 300)}, []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "EUR", 300)}},
		{"two budgets, one held", []Reservation{ask("b", "w1", "USD", 300), ask("c", "w1", "USD", 300)}, []Reservation{ask("c", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 300)}},
	} {
		if got := AsksBeyondHeld(c.rs, c.held); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSumAsks: an episode's asks add up per (budget, period), in the order
// first asked; one period in two currencies, or a sum beyond int64, is
// refused.
func TestSumAsks(t *testing.T) {
	ask := func(budget, period, cur string, amount int64) Reservation {
		return Reservation{Budget: budget, Period: period, Currency: cur, Limit: 1000, Amount: amount}
	}
	for _, c := range []struct {
		name    string
		rs      []Reservation
		want    []Reservation
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"one", []Reservation{ask("b", "w1", "USD", 300)}, []Reservation{ask("b", "w1", "USD", 300)}, ""},
		{"two steps in one budget", []Reservation{ask("b", "w1", "USD", 300), ask("b", "w1", "USD", 200)}, []Reservation{ask("b", "w1", "USD", 500)}, ""},
		{"two budgets", []Reservation{ask("c", "w1", "USD", 300), ask("b", "w1", "USD", 200), ask("c", "w1", "USD", 1)},
			[]Reservation{ask("c", "w1", "USD", 301), ask("b", "w1", "USD", 200)}, ""},
		{"two periods", []Reservation{ask("b", "w1", "USD", 300), ask("b", "w2", "USD", 200)}, []Reservation{ask("b", "w1", "USD", 300), ask("b", "w2", "USD", 200)}, ""},
		{"two currencies", []Reservation{ask("b", "w1", "USD", 300), ask("b", "w1", "EUR", 200)}, nil, "budget b period w1 is asked in USD and in EUR: a budget counts one currency"},
		{"beyond int64", []Reservation{ask("b", "w1", "USD", math.MaxInt64), ask("b", "w1", "USD", 1)}, nil, "budget b period w1: the asks add up beyond what int64 minor units hold"},
	} {
		got, err := SumAsks(c.rs)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %v, want %q", c.name, err, c.wantErr)
		case c.wantErr == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}
