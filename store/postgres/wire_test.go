package postgres_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestWireBytes proves the stored body is the step's wire JSON byte for
// byte (no reformatting, as jsonb would do), and reads return it as is.
func TestWireBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	in := userStep("s1", "x1")
	in.Content = "<b>&</b> ünïcode \u2028 \"quoted\" \\ tab\t"
	in.Inputs = json.RawMessage(`{"z":1,"a":[1.50,2e3],"dup":1,"dup":2}`)
	in.Metadata = map[string]any{"z": 1.25, "a": "b"}
	out, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(out[0])
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if err := rawConn(t).QueryRow(ctx, `SELECT body FROM `+quoted(st.Schema(), "steps")+` WHERE id = 'x1'`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("stored body differs from the wire JSON:\nstored %s\n  wire %s", body, want)
	}
	if !bytes.Contains(body, []byte(`{"z":1,"a":[1.50,2e3],"dup":1,"dup":2}`)) {
		t.Errorf("raw inputs were rewritten: %s", body)
	}
	got, err := st.StepGet(ctx, &store.StepGetParams{ID: "x1"})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(got); !bytes.Equal(again, body) {
		t.Errorf("read back:\n got %s\nwant %s", again, body)
	}
}

func quoted(schema, table string) string {
	return pgx.Identifier{schema, table}.Sanitize()
}
