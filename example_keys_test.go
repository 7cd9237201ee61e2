package allot_test

import (
	"errors"
	"fmt"
	"time"

	"allot"
)

// A run without a key gets the Schedule's key for its nominal time, so a
// manual run, a backfill and the scheduled run of one time share one key
// and one episode.
func ExampleResolveRunKey() {
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	rk, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: "weekly-video", Nominal: nominal})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rk.Key)
	fmt.Println(rk.Key == allot.AllocationKey("weekly-video", nominal))
	// Output:
	// weekly-video/scheduled-2026-08-03T02:00:00Z
	// true
}

// An operator's own key is placed under the pipeline; a key that carries
// no time needs the nominal time from which the period comes.
func ExampleResolveRunKey_operatorKey() {
	_, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: "weekly-video", Key: "rerun-42"})
	fmt.Println(allot.ErrorType(err))

	rk, err := allot.ResolveRunKey(allot.RunKeyInput{
		Pipeline: "weekly-video",
		Key:      "rerun-42",
		Nominal:  time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rk.Key, rk.Nominal.Format(time.RFC3339))
	// Output:
	// InvalidInput
	// weekly-video/rerun-42 2026-08-03T02:00:00Z
}

// Money is minor units of one currency: it prints in major units, and a
// sum refuses another currency or an overflow rather than guessing.
func ExampleMoney() {
	video := allot.Money{Amount: 250, Currency: "USD"}
	cover := allot.Money{Amount: 35, Currency: "USD"}
	total, err := video.Add(cover)
	fmt.Println(total, err)

	_, err = total.Add(allot.Money{Amount: 500, Currency: "JPY"})
	fmt.Println(errors.Is(err, allot.ErrCurrencyMismatch))

	fmt.Println(allot.Money{Amount: 500, Currency: "JPY"}, allot.Money{Amount: 1250, Currency: "KWD"})
	// Output:
	// 2.85 USD <nil>
	// true
	// 500 JPY 1.250 KWD
}
