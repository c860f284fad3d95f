package main_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/stepwise-run/stepwise"

// layerRow is one row of the layer table in docs/ARCHITECTURE.md.
type layerRow struct {
	layer         string
	pkgs          []string // module-relative paths; "." is the root package
	allow, deny   []string
	root, above   bool // "root" / "the packages above" in the may-import column
	everything    bool
	denyDrivers   bool // "drivers" in the must-not-import column
	denyRootNamed bool // "the root package" or "engine" in the must-not-import column
}

var backticked = regexp.MustCompile("`([^`]+)`")

// TestArchitectureLayers keeps docs/ARCHITECTURE.md's layer table true to
// the imports: every package of the module is named in exactly one row and
// imports, of the module, only what its row allows (see the paragraph under
// the table for how a row reads).
func TestArchitectureLayers(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{} // module-relative package → its module imports (not its tests')
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := rel(fields[0])
		imports[pkg] = nil
		for _, imp := range fields[1:] {
			if r := rel(imp); r != "" {
				imports[pkg] = append(imports[pkg], r)
			}
		}
	}
	if len(imports) < 30 {
		t.Fatalf("go list found %d packages of the module; expected all of them:\n%s", len(imports), out)
	}
	rows := parseLayers(t, string(doc), imports)

	rowOf := map[string]int{}
	for i, r := range rows {
		for _, p := range r.pkgs {
			if j, ok := rowOf[p]; ok {
				t.Errorf("%s is in two rows of the layer table: %q and %q", show(p), rows[j].layer, r.layer)
			}
			rowOf[p] = i
		}
	}
	var drivers []string
	for _, r := range rows {
		if r.layer == "store drivers" {
			for _, p := range r.pkgs {
				if !strings.Contains(p, "/internal/") { // their shared code is not a driver
					drivers = append(drivers, p)
				}
			}
		}
	}
	if len(drivers) == 0 {
		t.Fatal(`the layer table has no "store drivers" row`)
	}
	for pkg, imps := range imports {
		i, ok := rowOf[pkg]
		if !ok {
			t.Errorf("%s is not named in docs/ARCHITECTURE.md's layer table", show(pkg))
			continue
		}
		r := rows[i]
		allowed := map[string]bool{}
		for _, p := range slices.Concat(r.pkgs, r.allow) {
			allowed[p] = true
		}
		if r.root {
			allowed["."] = true
		}
		if r.above {
			for _, above := range rows[:i] {
				for _, p := range above.pkgs {
					allowed[p] = true
				}
			}
		}
		denied := map[string]bool{}
		for _, p := range r.deny {
			denied[p] = true
		}
		if r.denyDrivers {
			for _, p := range drivers {
				denied[p] = true
			}
		}
		if r.denyRootNamed {
			denied["."] = true
		}
		for _, imp := range imps {
			if denied[imp] || (!r.everything && !allowed[imp]) {
				t.Errorf("%s (%q) imports %s, which its row of docs/ARCHITECTURE.md's layer table does not allow", show(pkg), r.layer, show(imp))
			}
		}
	}
}

// parseLayers reads the table under "## Layers"; a backticked word counts
// when it names a package of the module (others are commands, tools or
// external modules).
func parseLayers(t *testing.T, doc string, known map[string][]string) []layerRow {
	t.Helper()
	_, table, ok := strings.Cut(doc, "| layer | packages | may import | must not import |")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no layer table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	pkgsIn := func(cell string) []string {
		var ps []string
		for _, m := range backticked.FindAllStringSubmatch(withoutAsides(cell), -1) {
			if _, ok := known[m[1]]; ok {
				ps = append(ps, m[1])
			}
		}
		return ps
	}
	var rows []layerRow
	for line := range strings.SplitSeq(strings.TrimSpace(table), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 4 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		r := layerRow{layer: cells[0], pkgs: pkgsIn(cells[1]), allow: pkgsIn(cells[2]), deny: pkgsIn(cells[3])}
		if strings.Contains(cells[1], "root package `stepwise`") {
			r.pkgs = append(r.pkgs, ".")
		}
		r.root = regexp.MustCompile(`(^|, )root(,|$)`).MatchString(cells[2])
		r.above = strings.Contains(cells[2], "the packages above")
		r.everything = cells[2] == "everything"
		r.denyDrivers = regexp.MustCompile(`(^|, )drivers\b`).MatchString(cells[3])
		r.denyRootNamed = strings.Contains(cells[3], "the root package") || regexp.MustCompile(`(^|, )engine\b`).MatchString(cells[3])
		if len(r.pkgs) == 0 {
			t.Errorf("layer %q names no package of the module", r.layer)
		}
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("read %d rows of the layer table", len(rows))
	}
	return rows
}

// withoutAsides is cell without its parenthesised remarks, which may name
// packages the row is not about.
func withoutAsides(cell string) string {
	var b strings.Builder
	depth := 0
	for _, c := range cell {
		switch {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// rel is a package path relative to the module ("." for the root package),
// or "" for a package of another module.
func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

func show(p string) string {
	if p == "." {
		return "the root package"
	}
	return p
}
