package pipelinetest

import (
	"os"
	"testing"

	"allot/pipeline"
)

// The defaults and every option make a file the pipeline package takes as
// they say.
func TestBudgetedParses(t *testing.T) {
	set, err := pipeline.Parse([]byte(Budgeted{}.TOML()), "defaults")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("weekly")
	if err != nil || len(p.Steps) != 1 || p.Steps[0].Name != "video" || p.Steps[0].MaxCost.Amount != 250 {
		t.Fatalf("the default pipeline: %+v", p)
	}
	full := Budgeted{Pipeline: "media", Budget: "b", Period: "month", Limit: 900, Currency: "EUR", Alerts: []float64{0.5, 0.9}, MaxCost: 300,
		Then: []Step{{Name: "cover", Kind: "paid", Action: "cover", MaxCost: 100}, {Name: "assemble", Kind: "local"}}}
	set, err = pipeline.Parse([]byte(full.TOML()), "full")
	if err != nil {
		t.Fatalf("%v\n%s", err, full.TOML())
	}
	p, err = set.Get("media")
	if err != nil || len(p.Steps) != 3 || p.Steps[1].Action != "cover" || p.Steps[1].MaxCost.Currency != "EUR" || p.Steps[2].Kind != "local" {
		t.Fatalf("the full pipeline: %+v", p)
	}
}

func TestWrite(t *testing.T) {
	path := Write(t, t.TempDir(), "# empty\n")
	if b, err := os.ReadFile(path); err != nil || string(b) != "# empty\n" {
		t.Fatalf("%s: %q, %v", path, b, err)
	}
}
