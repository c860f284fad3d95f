package eval_test

import (
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/store"
)

const jsonl = `{"input": "2+2", "expected": "4"}
{"input": "capital of France", "expected": "Paris", "metadata": {"topic": "geo"}}

not json at all
{"expected": "no input"}
{"input": ""}
{"input": "typo", "expceted": "x"}
{"input": "structured", "expected": {"answer": 42}}
{"input": "bad metadata", "metadata": [1, 2]}
{"input": 7}
{"input": "two values"} {"input": "on one line"}
` + `{"input": "` + "%LONG%" + `"}
{"input": "last line without newline"}`

func TestImportJSONL(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		data := strings.Replace(jsonl, "%LONG%", strings.Repeat("x", 2000), 1)
		res, err := eval.ImportJSONL(ctx, st, strings.NewReader(data), eval.ImportParams{Name: "qa", MaxLineBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		for _, le := range res.Errors {
			lines = append(lines, le.Line)
			if !errors.Is(le, eval.ErrMalformedLine) {
				t.Errorf("line error %v does not wrap ErrMalformedLine", le)
			}
		}
		if want := []int{4, 5, 6, 7, 9, 10, 11, 12}; !equal(lines, want) {
			t.Errorf("malformed lines = %v, want %v (%v)", lines, want, res.Errors)
		}
		for _, want := range []string{"line 5: \"input\" is missing", "line 7: invalid JSON object: json: unknown field \"expceted\"", "line 12: longer than 1000 bytes"} {
			if !strings.Contains(joinErrs(res.Errors), want) {
				t.Errorf("errors lack %q:\n%s", want, joinErrs(res.Errors))
			}
		}
		if res.Imported != 4 || res.Dataset.ItemCount != 4 || res.Dataset.Name != "qa" {
			t.Fatalf("imported %d, dataset %+v", res.Imported, res.Dataset)
		}
		items, err := st.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: res.Dataset.ID})
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, it := range items {
			got = append(got, it.Input+"="+it.Expected)
		}
		if want := "2+2=4|capital of France=Paris|structured={\"answer\": 42}|last line without newline="; strings.Join(got, "|") != want {
			t.Errorf("items = %s\nwant %s", strings.Join(got, "|"), want)
		}
		if string(items[1].Metadata) != `{"topic": "geo"}` {
			t.Errorf("metadata = %s", items[1].Metadata)
		}

		// Nothing valid: nothing created.
		res, err = eval.ImportJSONL(ctx, st, strings.NewReader("nope\n{\"x\":1}\n"), eval.ImportParams{Name: "bad"})
		if !errors.Is(err, eval.ErrEmptyDataset) || len(res.Errors) != 2 {
			t.Errorf("all lines malformed: %v, %+v", err, res)
		}
		if _, err := st.DatasetGet(ctx, &store.DatasetGetParams{Name: "bad"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("dataset created from bad input: %v", err)
		}
		_, err = eval.ImportJSONL(ctx, st, strings.NewReader(`{"input":"x"}`), eval.ImportParams{Name: "qa"})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("name taken: %v", err)
		}
		_, err = eval.ImportJSONL(ctx, st, strings.NewReader(`{"input":"x"}`), eval.ImportParams{})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("no name: %v", err)
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func joinErrs(errs []*eval.LineError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

func FuzzParseJSONL(f *testing.F) {
	f.Add(jsonl, 100)
	f.Add("{\"input\":\"a\"}\r\n\r\n{\"input\":\"b\"}", 10)
	f.Fuzz(func(t *testing.T, data string, max int) {
		items, errs, err := eval.ParseJSONL(strings.NewReader(data), max%5000)
		if err != nil {
			t.Fatal(err)
		}
		nonBlank := 0
		for _, l := range strings.Split(data, "\n") {
			if strings.TrimSpace(l) != "" {
				nonBlank++
			}
		}
		if len(items)+len(errs) > nonBlank+1 {
			t.Errorf("%d items and %d errors from %d non-blank lines", len(items), len(errs), nonBlank)
		}
		for _, it := range items {
			if strings.TrimSpace(it.Input) == "" {
				t.Errorf("item without input: %+v", it)
			}
		}
	})
}
