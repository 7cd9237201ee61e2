// Command importgroups checks that every Go file of the module groups its
// imports the way `goimports -local <module>` does: the standard library
// first, then third-party modules, then the module's own packages, the
// groups separated by one blank line and each sorted by path. It needs only
// the standard library, so CI runs it without installing anything.
//
//	go run ./internal/importgroups .      # list the files that differ; exit 1 if any
//	go run ./internal/importgroups -w .   # rewrite them in place
//
// A comment above an import or after it on its line moves with it. A
// block it cannot rewrite safely (a comment on no import of its own, two
// imports on one line) is reported and left alone.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	write := flag.Bool("w", false, "rewrite the files whose imports are not grouped")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: importgroups [-w] <module root>")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	bad, err := check(flag.Arg(0), *write)
	for _, f := range bad {
		fmt.Println(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "importgroups:", err)
		os.Exit(1)
	}
	if len(bad) > 0 && !*write {
		fmt.Fprintln(os.Stderr, "importgroups: these files' imports are not grouped std, third-party, module (run go run ./internal/importgroups -w .)")
		os.Exit(1)
	}
}

// check walks the module at root and returns the files whose imports are
// not grouped, rewriting them first when write is set.
func check(root string, write bool) ([]string, error) {
	local, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	var bad []string
	var errs []error
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			// What the go command ignores, and nested modules.
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fixed, err := group(path, src, local)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if bytes.Equal(fixed, src) {
			return nil
		}
		bad = append(bad, path)
		if write {
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.WriteFile(path, fixed, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return bad, errors.Join(errs...)
}

// modulePath reads the module's path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", root)
}

// Groups in goimports' order.
const (
	groupStd = iota
	groupThirdParty
	groupLocal
)

func groupOf(path, local string) int {
	switch {
	case path == local || strings.HasPrefix(path, local+"/"):
		return groupLocal
	case !strings.Contains(strings.Split(path, "/")[0], "."):
		return groupStd
	default:
		return groupThirdParty
	}
}

// chunk is one import with its comments: whole lines of the source.
type chunk struct {
	path, name string
	lines      []string
}

// group returns src with every parenthesized import block grouped.
func group(filename string, src []byte, local string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	tf := fset.File(f.Pos())
	lines := strings.SplitAfter(string(src), "\n")
	out := slices.Clone(lines)
	// From the last block up, so that the line numbers of earlier ones hold.
	for _, d := range slices.Backward(f.Decls) {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT || !gd.Lparen.IsValid() {
			continue
		}
		open, close := tf.Line(gd.Lparen), tf.Line(gd.Rparen)
		var chunks []chunk
		next := open + 1 // the first line not yet in a chunk
		for _, spec := range gd.Specs {
			s := spec.(*ast.ImportSpec)
			start := tf.Line(s.Pos())
			if s.Doc != nil {
				start = tf.Line(s.Doc.Pos())
			}
			end := tf.Line(s.End())
			if s.Comment != nil {
				end = tf.Line(s.Comment.End())
			}
			if start < next || end >= close {
				return nil, fmt.Errorf("%s:%d: an import shares its line: not rewritten", filename, start)
			}
			if err := onlyBlank(filename, lines, next, start); err != nil {
				return nil, err
			}
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return nil, err
			}
			c := chunk{path: p, lines: lines[start-1 : end]}
			if s.Name != nil {
				c.name = s.Name.Name
			}
			chunks = append(chunks, c)
			next = end + 1
		}
		if err := onlyBlank(filename, lines, next, close); err != nil {
			return nil, err
		}
		slices.SortStableFunc(chunks, func(a, b chunk) int {
			if ga, gb := groupOf(a.path, local), groupOf(b.path, local); ga != gb {
				return ga - gb
			}
			if a.path != b.path {
				return strings.Compare(a.path, b.path)
			}
			return strings.Compare(a.name, b.name)
		})
		var body []string
		for k, c := range chunks {
			if k > 0 && groupOf(chunks[k-1].path, local) != groupOf(c.path, local) {
				body = append(body, "\n")
			}
			body = append(body, c.lines...)
		}
		// Lines open+1 .. close-1 (1-based) are out[open : close-1].
		out = slices.Replace(out, open, close-1, body...)
	}
	return []byte(strings.Join(out, "")), nil
}

// onlyBlank reports a line in [from, to) (1-based) that is not blank: a
// comment that belongs to no import, which has no place to move to.
func onlyBlank(filename string, lines []string, from, to int) error {
	for l := from; l < to; l++ {
		if strings.TrimSpace(lines[l-1]) != "" {
			return fmt.Errorf("%s:%d: a comment on no import of its own: not rewritten", filename, l)
		}
	}
	return nil
}
