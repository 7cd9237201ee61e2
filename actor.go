package allot

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTextLen bounds every free text an operator gives (reasons, notes,
// names of who acted), in characters: the ledger keeps it and every
// listing prints it (docs/design.md, "Operator input").
const MaxTextLen = 1000

// CheckText refuses a free text longer than MaxTextLen characters, not
// UTF-8, or with control characters other than tab and newline. flag names
// where it came from (e.g. "--reason") for the error.
func CheckText(flag, text string) error {
	if !utf8.ValidString(text) {
		return fmt.Errorf("%s is not UTF-8 text: give it as plain text", flag)
	}
	if n := utf8.RuneCountInString(text); n > MaxTextLen {
		return fmt.Errorf("%s is %d characters, over the limit of %d: shorten it, and keep the details elsewhere (a ticket) with a reference in %s", flag, n, MaxTextLen, flag)
	}
	for i, r := range text {
		if r != '\t' && r != '\n' && unicode.IsControl(r) {
			return fmt.Errorf("%s has a control character (%U at byte %d): give plain text, with tabs and newlines at most", flag, r, i)
		}
	}
	return nil
}

// Actor is who an operator command records as acting: by when given
// (--by), else $USER, else the operating system's name of the user. Every
// command that records who acted resolves it here, so that they agree.
func Actor(by string) (string, error) {
	name := strings.TrimSpace(by)
	if name == "" {
		name = strings.TrimSpace(os.Getenv("USER"))
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = strings.TrimSpace(u.Username)
		}
	}
	if name == "" {
		return "", fmt.Errorf("who acts is unknown: $USER is not set and the operating system names no user; pass --by NAME")
	}
	if err := CheckText("--by", name); err != nil {
		return "", err
	}
	return name, nil
}
