package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A mutant schema carries many mutants in one test binary: each mutated
// line is rewritten, keeping the file's line numbers, into a choice
// between its mutants and the original, taken by the variable schemaVar,
// which a file the overlay adds to the mutated package sets from the
// environment (schemaEnv). Linking a test binary is most of a mutant's
// cost (about 8 s each on 2 cores, issue 39), so one build per test
// package replaces one per mutant for every mutant it carries; each then
// runs the named tests with its number set.
//
// A line becomes a choice only where the choice means exactly what the
// line meant, N being the mutant's number:
//   - one whole simple statement (an assignment without :=, a call, a
//     return, an increment, a send, a go or defer, a break or continue)
//     becomes `if schemaVar == "N" { TO } else { FROM }`: an if captures
//     no break or continue, and it declares nothing;
//   - the header of an if (`if COND {` or `} else if COND {`, the same
//     init statement before and after) or a case of a switch without a
//     tag (`case COND:`) gets the condition
//     `(schemaVar == "N" && (TO)) || (schemaVar != "N" && (FROM))`, which
//     evaluates only the chosen condition, once;
//   - a line inside a raw string literal (a query): the literal becomes
//     `schemaTextFunc(LITERAL, "N", MUTATED)`, the original literal left
//     where it was and the mutated one a constant of the added file.
//
// Any other line (a declaration with :=, a case of a switch with a tag, a
// struct field, a test file, a file the tests read at run time) is built
// on its own, as before. So is a mutant whose choice does not compile (the
// compiler names its lines): a mutant that does not compile on its own is
// still reported broken.
const (
	schemaVar      = "allotMutantSchemaActive"
	schemaTextFunc = "allotMutantSchemaText"
	schemaEnv      = "ALLOT_MUTANT_SCHEMA_ACTIVE"
)

// located is a mutant found in its file: the file's lines and the index of
// its from-line.
type located struct {
	lines []string // with their "\n"
	at    int
}

// locate finds m's from-line in its file, once, or says why the entry is
// broken.
func locate(m mutant) (located, string) {
	orig, err := os.ReadFile(m.File)
	if err != nil {
		return located{}, err.Error()
	}
	lines := strings.SplitAfter(string(orig), "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSuffix(l, "\n") == m.From {
			if at >= 0 {
				return located{}, fmt.Sprintf("line %d of the list: its from-line is in %s more than once (lines %d and %d): make it unique", m.Line, m.File, at+1, i+1)
			}
			at = i
		}
	}
	if at < 0 {
		return located{}, fmt.Sprintf("line %d of the list: its from-line is not in %s (the code changed): update the entry", m.Line, m.File)
	}
	return located{lines: lines, at: at}, ""
}

// choice is how one mutated line becomes a choice in a schema.
type choice struct {
	kind   string // "stmt", "if", "case" or "text"
	indent string // the line's leading white space
	prefix string // "} else " before an if's header, or ""
	init   string // an if's init statement, or ""
	// The statement or the condition, before and after; for "text", to
	// is the mutated literal's value.
	from, to string
	// For "text": the literal's offsets in the file.
	litStart, litEnd int
	// The lines (from 1) the choice spans, where the compiler may name it.
	first, last int
}

// schemaChoice says whether the mutant at loc can be a choice in a schema,
// and how; ok is false for any line that must be built on its own.
func schemaChoice(m mutant, loc located) (choice, bool) {
	if filepath.Ext(m.File) != ".go" || strings.HasSuffix(m.File, "_test.go") {
		return choice{}, false
	}
	src := strings.Join(loc.lines, "")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, m.File, src, parser.SkipObjectResolution)
	if err != nil {
		return choice{}, false
	}
	line := loc.at + 1
	from := stripComment(m.From)
	to := stripComment(m.To)
	indent := from[:len(from)-len(strings.TrimLeft(from, " \t"))]
	offset := func(p token.Pos) int { return fset.Position(p).Offset }
	lineOf := func(p token.Pos) int { return fset.Position(p).Line }
	text := func(n ast.Node) string { return src[offset(n.Pos()):offset(n.End())] }
	c := choice{indent: indent, first: line, last: line}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if found || n == nil {
			return false
		}
		if lineOf(n.Pos()) > line || lineOf(n.End()) < line {
			return false // the line is not in n
		}
		var list []ast.Stmt
		switch n := n.(type) {
		case *ast.BlockStmt:
			list = n.List
		case *ast.CaseClause:
			list = n.Body
		case *ast.CommClause:
			list = n.Body
		case *ast.IfStmt:
			if lineOf(n.If) != line {
				return true
			}
			if lineOf(n.Body.Lbrace) != line {
				return false
			}
			header := src[offset(n.If) : offset(n.Body.Lbrace)+1]
			prefix, ok := strings.CutSuffix(strings.TrimPrefix(from, indent), header)
			if !ok || (prefix != "" && prefix != "} else ") {
				return false
			}
			init := ""
			if n.Init != nil {
				init = text(n.Init)
			}
			toInit, toCond, ok := ifHeader(strings.TrimPrefix(strings.TrimLeft(to, " \t"), prefix))
			if !ok || toInit != init {
				return false
			}
			c.kind, c.prefix, c.init, c.from, c.to = "if", prefix, init, text(n.Cond), toCond
			found = true
			return false
		case *ast.SwitchStmt:
			if n.Tag != nil {
				return true
			}
			for _, s := range n.Body.List {
				cc := s.(*ast.CaseClause)
				if lineOf(cc.Case) != line {
					continue
				}
				if len(cc.List) == 0 || lineOf(cc.Colon) != line || strings.TrimSpace(from) != src[offset(cc.Case):offset(cc.Colon)+1] {
					return false
				}
				toCond, ok := caseHeader(strings.TrimSpace(to))
				if !ok {
					return false
				}
				var conds []string
				for _, e := range cc.List {
					conds = append(conds, text(e))
				}
				c.kind, c.from, c.to = "case", orOf(conds), toCond
				found = true
				return false
			}
			return true
		case *ast.BasicLit:
			c, found = rawTextChoice(m, loc, src, n, offset(n.Pos()), lineOf(n.Pos()), lineOf(n.End()))
			return false
		}
		for _, s := range list {
			if lineOf(s.Pos()) != line || lineOf(s.End()) != line {
				continue
			}
			// The statement must be the whole line.
			if !simple(s) || strings.TrimSpace(from) != text(s) {
				return false
			}
			t, ok := oneSimpleStatement(to)
			if !ok || !returnsAlike(s, t) {
				return false
			}
			c.kind, c.from, c.to = "stmt", strings.TrimSpace(from), strings.TrimSpace(to)
			found = true
			return false
		}
		return true
	})
	return c, found
}

// rawTextChoice is the choice of a mutant whose line is inside the raw
// string literal lit (after its first line): ok when the mutated line
// keeps the literal's end where it was.
func rawTextChoice(m mutant, loc located, src string, lit *ast.BasicLit, start, firstLine, lastLine int) (choice, bool) {
	line := loc.at + 1
	if lit.Kind != token.STRING || !strings.HasPrefix(lit.Value, "`") || line <= firstLine || line > lastLine {
		return choice{}, false
	}
	// On the literal's last line, the code after its closing quote must
	// stay as it was; inside it, no quote may come in.
	fromTick, toTick := strings.Index(m.From, "`"), strings.Index(m.To, "`")
	if line == lastLine {
		if fromTick < 0 || toTick < 0 || m.From[fromTick:] != m.To[toTick:] || strings.Contains(m.To[:toTick], "`") {
			return choice{}, false
		}
	} else if toTick >= 0 {
		return choice{}, false
	}
	end := start + len(lit.Value)
	mutated := strings.Join(loc.lines[:loc.at], "") + m.To + "\n" + strings.Join(loc.lines[loc.at+1:], "")
	value := mutated[start+1 : end+len(m.To)-len(m.From)-1]
	return choice{kind: "text", to: strings.ReplaceAll(value, "\r", ""), litStart: start, litEnd: end, first: firstLine, last: lastLine}, true
}

// simple is a statement that means the same inside an if's block: no
// declaration (its names would end with the block), no label, no
// fallthrough (it must end a case).
func simple(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.AssignStmt:
		return s.Tok != token.DEFINE
	case *ast.ExprStmt, *ast.IncDecStmt, *ast.SendStmt, *ast.GoStmt, *ast.DeferStmt, *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok == token.BREAK || s.Tok == token.CONTINUE
	}
	return false
}

// returnsAlike keeps a function's last return terminating: a return
// becomes a choice only between returns (an if whose both branches return
// terminates; one with a plain statement would not compile).
func returnsAlike(from, to ast.Stmt) bool {
	_, a := from.(*ast.ReturnStmt)
	_, b := to.(*ast.ReturnStmt)
	return a == b
}

// oneSimpleStatement parses line as one simple statement (or none: an
// empty line deletes the original).
func oneSimpleStatement(line string) (ast.Stmt, bool) {
	if strings.TrimSpace(line) == "" {
		return &ast.EmptyStmt{}, true
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+line+"\n}\n", parser.SkipObjectResolution)
	if err != nil {
		return nil, false
	}
	body := f.Decls[0].(*ast.FuncDecl).Body.List
	if len(body) != 1 || !simple(body[0]) {
		return nil, false
	}
	return body[0], true
}

// ifHeader parses `if [INIT; ]COND {` and returns INIT and COND as written.
func ifHeader(header string) (init, cond string, ok bool) {
	src := "package p\nfunc _() {\n" + header + "}\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return "", "", false
	}
	body := f.Decls[0].(*ast.FuncDecl).Body.List
	if len(body) != 1 {
		return "", "", false
	}
	s, isIf := body[0].(*ast.IfStmt)
	if !isIf || s.Else != nil || !strings.HasPrefix(strings.TrimSpace(header), "if ") || !strings.HasSuffix(strings.TrimSpace(header), "{") {
		return "", "", false
	}
	text := func(n ast.Node) string {
		return src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset]
	}
	if s.Init != nil {
		init = text(s.Init)
	}
	return init, text(s.Cond), true
}

// caseHeader parses `case A, B:` and returns its condition, `(A) || (B)`.
func caseHeader(header string) (string, bool) {
	src := "package p\nfunc _() {\nswitch {\n" + header + "\n}\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil || !strings.HasPrefix(header, "case ") || !strings.HasSuffix(header, ":") {
		return "", false
	}
	sw := f.Decls[0].(*ast.FuncDecl).Body.List[0].(*ast.SwitchStmt)
	if len(sw.Body.List) != 1 {
		return "", false
	}
	cc := sw.Body.List[0].(*ast.CaseClause)
	if len(cc.List) == 0 || len(cc.Body) != 0 {
		return "", false
	}
	var conds []string
	for _, e := range cc.List {
		conds = append(conds, src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset])
	}
	return orOf(conds), true
}

// orOf is a case's list of conditions as one: a switch without a tag takes
// the first that holds, left to right, as || does.
func orOf(conds []string) string {
	if len(conds) == 1 {
		return conds[0]
	}
	return "(" + strings.Join(conds, ") || (") + ")"
}

// stripComment drops a line's trailing // or /* */ comment, which would
// swallow the rest of a choice written on one line.
func stripComment(line string) string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(line))
	s.Init(file, []byte(line), nil, scanner.ScanComments)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return line
		}
		if tok == token.COMMENT {
			return strings.TrimRight(line[:file.Offset(pos)], " \t")
		}
	}
}

// rewrite is the line that carries the choices of the members ms, all of
// one line, without its newline.
func rewrite(ms []schemaMember) string {
	c0 := ms[0].c
	var b strings.Builder
	b.WriteString(c0.indent)
	id := func(mb schemaMember) string { return strconv.Quote(strconv.Itoa(mb.id)) }
	switch c0.kind {
	case "stmt":
		for i, mb := range ms {
			if i > 0 {
				b.WriteString(" else ")
			}
			fmt.Fprintf(&b, "if %s == %s { %s }", schemaVar, id(mb), mb.c.to)
		}
		fmt.Fprintf(&b, " else { %s }", c0.from)
		return b.String()
	case "if":
		b.WriteString(c0.prefix + "if ")
		if c0.init != "" {
			b.WriteString(c0.init + "; ")
		}
	case "case":
		b.WriteString("case ")
	}
	var none []string
	for _, mb := range ms {
		fmt.Fprintf(&b, "(%s == %s && (%s)) || ", schemaVar, id(mb), mb.c.to)
		none = append(none, fmt.Sprintf("%s != %s", schemaVar, id(mb)))
	}
	fmt.Fprintf(&b, "(%s && (%s))", strings.Join(none, " && "), c0.from)
	if c0.kind == "if" {
		b.WriteString(" {")
	} else {
		b.WriteString(":")
	}
	return b.String()
}

// schemaMember is a mutant of a schema: its number in the run, its place
// and its choice.
type schemaMember struct {
	id  int
	m   mutant
	loc located
	c   choice
}

// schema is the test binary of one test package that carries its members.
type schema struct {
	pkg     string
	members []schemaMember
	bin     string
	build   time.Duration
	control time.Duration // of the control run
}

// errorLine matches a compiler error's file and line.
var errorLine = regexp.MustCompile(`(?m)^(?:\S*/)?([^\s/:]+\.go):(\d+):`)

// buildSchema builds s's test binary into dir, and returns the members it
// left out: those whose choice does not compile (each is then built on its
// own, where a mutant that does not compile is reported broken). When the
// compiler names a line no member is on, every member is left out.
func buildSchema(ctx context.Context, s *schema, dir string) ([]schemaMember, error) {
	var left []schemaMember
	for attempt := 0; len(s.members) > 0; attempt++ {
		out, err := tryBuildSchema(ctx, s, dir)
		if err == nil {
			return left, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var out1 []int
		unplaced := false
		for _, e := range errorLine.FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(e[2])
			placed := false
			for i, mb := range s.members {
				if filepath.Base(mb.m.File) == e[1] && mb.c.first <= n && n <= mb.c.last {
					out1, placed = append(out1, i), true
				}
			}
			unplaced = unplaced || !placed
		}
		if unplaced || len(out1) == 0 || attempt > 5 {
			left = append(left, s.members...)
			s.members = nil
			return left, nil
		}
		keep := s.members[:0:0]
		for i, mb := range s.members {
			if slices.Contains(out1, i) {
				left = append(left, mb)
			} else {
				keep = append(keep, mb)
			}
		}
		s.members = keep
	}
	return left, nil
}

// edit replaces text[off:end] of a file.
type edit struct {
	off, end int
	text     string
}

// schemaFile is the text of file with the choices of its members ms.
func schemaFile(lines []string, ms []schemaMember) (string, error) {
	src := strings.Join(lines, "")
	lineStart := make([]int, len(lines)+1)
	for i, l := range lines {
		lineStart[i+1] = lineStart[i] + len(l)
	}
	byLine := map[int][]schemaMember{} // stmt, if, case: by their line
	byLit := map[int][]schemaMember{}  // text: by their literal
	for _, mb := range ms {
		if mb.c.kind == "text" {
			byLit[mb.c.litStart] = append(byLit[mb.c.litStart], mb)
		} else {
			byLine[mb.loc.at] = append(byLine[mb.loc.at], mb)
		}
	}
	var edits []edit
	for at, ms := range byLine {
		edits = append(edits, edit{lineStart[at], lineStart[at] + len(strings.TrimSuffix(lines[at], "\n")), rewrite(ms)})
	}
	for start, ms := range byLit {
		var tail strings.Builder
		for _, mb := range ms {
			fmt.Fprintf(&tail, ", %q, %s%d)", strconv.Itoa(mb.id), schemaTextFunc, mb.id)
		}
		edits = append(edits, edit{start, start, strings.Repeat(schemaTextFunc+"(", len(ms))},
			edit{ms[0].c.litEnd, ms[0].c.litEnd, tail.String()})
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.off - b.off })
	var b strings.Builder
	at := 0
	for _, e := range edits {
		if e.off < at {
			return "", fmt.Errorf("two choices overlap at offset %d", e.off)
		}
		b.WriteString(src[at:e.off])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	return b.String(), nil
}

// tryBuildSchema writes the overlay of s's members and builds the test
// binary, returning the compiler's output when it fails.
func tryBuildSchema(ctx context.Context, s *schema, dir string) (string, error) {
	byFile := map[string][]schemaMember{}
	for _, mb := range s.members {
		byFile[mb.m.File] = append(byFile[mb.m.File], mb)
	}
	replace := map[string]string{}
	switches := map[string]*strings.Builder{} // package folder -> the added file
	for i, file := range slices.Sorted(maps.Keys(byFile)) {
		ms := byFile[file]
		text, err := schemaFile(ms[0].loc.lines, ms)
		if err != nil {
			return "", err
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return "", err
		}
		// Under its own name, which the compiler's errors give.
		to := filepath.Join(dir, strconv.Itoa(i), filepath.Base(file))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(to, []byte(text), 0o644); err != nil {
			return "", err
		}
		replace[abs] = to
		sw := switches[filepath.Dir(abs)]
		if sw == nil {
			name, err := packageName(file)
			if err != nil {
				return "", err
			}
			sw = &strings.Builder{}
			fmt.Fprintf(sw, "package %s\n\nimport \"os\"\n\n// Added by the mutants tool (internal/mutants/schema.go).\nvar %s = os.Getenv(%q)\n\n", name, schemaVar, schemaEnv)
			fmt.Fprintf(sw, "func %s(orig, id, mutated string) string {\n\tif %s == id {\n\t\treturn mutated\n\t}\n\treturn orig\n}\n", schemaTextFunc, schemaVar)
			switches[filepath.Dir(abs)] = sw
		}
		for _, mb := range ms {
			if mb.c.kind == "text" {
				fmt.Fprintf(sw, "\nconst %s%d = %q\n", schemaTextFunc, mb.id, mb.c.to)
			}
		}
	}
	for pkgDir, sw := range switches {
		to := filepath.Join(dir, fmt.Sprintf("switch-%d.go", len(replace)))
		if err := os.WriteFile(to, []byte(sw.String()), 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(pkgDir, "zz_mutant_schema.go")] = to
	}
	overlay, err := writeOverlay(dir, replace)
	if err != nil {
		return "", err
	}
	s.bin = filepath.Join(dir, "test.bin")
	started := time.Now()
	out, err := exec.CommandContext(ctx, "go", "test", "-c", noDWARF, "-overlay", overlay, "-o", s.bin, s.pkg).CombinedOutput()
	s.build += time.Since(started)
	return string(out), err
}

// controlRun runs s's binary with no mutant chosen on the tests its
// members name, which must pass: else a mutant's kill might be the
// schema's doing, not its own. go test splits a -run pattern at each |
// outside brackets and parentheses into alternatives, each matched level
// by level, so the members' patterns joined by | name exactly their
// tests. It returns the tests' output when they fail.
func controlRun(ctx context.Context, s *schema) (string, error) {
	var patterns []string
	for _, mb := range s.members {
		if !slices.Contains(patterns, mb.m.Run) {
			patterns = append(patterns, mb.m.Run)
		}
	}
	cmd := exec.CommandContext(ctx, s.bin, "-test.short", "-test.count=1", "-test.timeout=10m", "-test.run", strings.Join(patterns, "|"))
	cmd.Dir = s.pkg
	cmd.Env = append(os.Environ(), schemaEnv+"=")
	started := time.Now()
	out, err := cmd.CombinedOutput()
	s.control = time.Since(started)
	if err != nil {
		return string(out), fmt.Errorf("with no mutant chosen, the tests its mutants name fail (%v)", err)
	}
	return "", nil
}

// packageName is the package clause of a Go file.
func packageName(file string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	return f.Name.Name, nil
}

// buildSchemata builds, jobs at a time, one schema per test package of
// the mutants that can be switched, and returns the schema of each
// mutant (by its index in ms) that it carries. The rest, and every mutant
// of a schema that failed to build, are built on their own.
func buildSchemata(ctx context.Context, ms []mutant, work string, jobs int) map[int]*schema {
	byPkg := map[string]*schema{}
	for i, m := range ms {
		loc, why := locate(m)
		if why != "" {
			continue // reported broken when it runs
		}
		c, ok := schemaChoice(m, loc)
		if !ok {
			continue
		}
		s := byPkg[m.Package]
		if s == nil {
			s = &schema{pkg: m.Package}
			byPkg[m.Package] = s
		}
		s.members = append(s.members, schemaMember{id: i, m: m, loc: loc, c: c})
	}
	var (
		mu   sync.Mutex
		plan = map[int]*schema{}
		next = make(chan *schema)
		wg   sync.WaitGroup
	)
	for range jobs {
		wg.Go(func() {
			for s := range next {
				n := len(s.members)
				dir, err := os.MkdirTemp(work, "schema-")
				var left []schemaMember
				if err == nil {
					left, err = buildSchema(ctx, s, dir)
				}
				var control string
				if err == nil && len(s.members) > 0 {
					control, err = controlRun(ctx, s)
				}
				mu.Lock()
				switch {
				case ctx.Err() != nil:
				case err != nil:
					fmt.Printf("schema %s: %v: its %d mutants are built on their own\n", s.pkg, err, n)
					if control != "" {
						fmt.Println("    " + strings.ReplaceAll(strings.TrimSpace(control), "\n", "\n    "))
					}
				default:
					for _, mb := range s.members {
						plan[mb.id] = s
					}
					fmt.Printf("schema %s: %d mutants in one build (%s; with none chosen, their tests pass: %s)", s.pkg, len(s.members), s.build.Round(time.Second), s.control.Round(time.Second))
					if len(left) > 0 {
						fmt.Printf("; %d whose switch did not compile are built on their own", len(left))
					}
					fmt.Println()
				}
				mu.Unlock()
			}
		})
	}
	for _, pkg := range slices.Sorted(maps.Keys(byPkg)) {
		if ctx.Err() != nil {
			break
		}
		next <- byPkg[pkg]
	}
	close(next)
	wg.Wait()
	return plan
}
