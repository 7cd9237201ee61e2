// Package docstest reads the command lines the README and the pages of
// docs/ show a reader, so that tests can run every one of them.
package docstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Command is one `go run ./starter ...` command line of the docs.
type Command struct {
	// Where is the page and line, "docs/operating.md:14".
	Where string
	// Line is what follows `go run ./starter `, without a trailing comment.
	Line string
}

// StarterCommands returns the starter command lines of root's README.md
// and docs/*.md, in the order they are written. A line ending in a
// backslash goes on in the next; a command ends at a closing backtick, a
// comment, a pipe, `&&` or a closing parenthesis.
func StarterCommands(root string) ([]Command, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	var out []Command
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, page)
		if err != nil {
			return nil, err
		}
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for n, line := range strings.Split(text, "\n") {
			for rest := line; ; {
				_, cmd, ok := strings.Cut(rest, "go run ./starter ")
				if !ok {
					break
				}
				rest = cmd
				for _, stop := range []string{"`", " # ", "   #", " | ", " && ", ")"} {
					if i := strings.Index(cmd, stop); i >= 0 {
						cmd = cmd[:i]
					}
				}
				out = append(out, Command{Where: fmt.Sprintf("%s:%d", filepath.ToSlash(rel), n+1), Line: strings.TrimSpace(cmd)})
			}
		}
	}
	return out, nil
}
