package main

import (
	"path/filepath"
	"testing"
)

// TestModuleImportsGrouped is the check CI runs, as a test: every file of
// the module groups its imports std, third-party, module.
func TestModuleImportsGrouped(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := check(root, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range bad {
		rel, _ := filepath.Rel(root, f)
		t.Errorf("%s: imports not grouped std, third-party, allot (go run ./internal/importgroups -w .)", rel)
	}
}

func TestGroup(t *testing.T) {
	src := `package p

import (
	"allot/internal/ledger"
	"fmt"
	// why the driver
	_ "modernc.org/sqlite"

	"context" // a line comment

	"allot"
	"go.temporal.io/sdk/client"
)

import "os"
`
	want := `package p

import (
	"context" // a line comment
	"fmt"

	"go.temporal.io/sdk/client"
	// why the driver
	_ "modernc.org/sqlite"

	"allot"
	"allot/internal/ledger"
)

import "os"
`
	got, err := group("p.go", []byte(src), "allot")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	again, err := group("p.go", got, "allot")
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != want {
		t.Errorf("not stable: grouped again\n%s", again)
	}
}

func TestGroupLeavesFloatingComment(t *testing.T) {
	src := "package p\n\nimport (\n\t\"fmt\"\n\n\t// about nothing below\n\n\t\"allot\"\n)\n"
	if _, err := group("p.go", []byte(src), "allot"); err == nil {
		t.Error("a comment on no import was rewritten, want an error")
	}
}
