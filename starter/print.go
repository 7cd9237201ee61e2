package main

import (
	"io"

	"allot"
)

// emit prints a command's answer (text for people, or JSON), or returns
// its error.
func emit[T any](c *cli, res T, err error, text func(io.Writer, T)) error {
	if err != nil {
		return err
	}
	c.print(res, func(w io.Writer) { text(w, res) })
	return nil
}

// money prints an amount as every command does (allot.Money); "" when
// there is no currency (no cost).
func money(minor int64, currency string) string {
	if currency == "" {
		return ""
	}
	return allot.Money{Amount: minor, Currency: currency}.String()
}

// dash fills an empty column of a table.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
