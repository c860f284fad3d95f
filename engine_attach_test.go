package stepwise_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// pngHeader is enough of a PNG for content sniffing.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00")

// TestToolAttachmentsStoredOnTheirStep: a tool returning attachments (Go
// API) gets them stored as attachments of its tool step, and the step is
// flagged (metadata screenshots and tool_attachments); the model sees only
// the text.
func TestToolAttachmentsStoredOnTheirStep(t *testing.T) {
	shot := tool.Func(llm.ToolDef{Name: "screenshot", Description: "Takes a screenshot.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *tool.Call) (*tool.Result, error) {
			return &tool.Result{Content: "took a screenshot", Attachments: []tool.Attachment{
				{Name: "page.png", Kind: "screenshot", Data: pngHeader},
				{Data: []byte("plain text log")},
				{Name: "empty"}, // ignored
			}}, nil
		})
	var seen string
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if assistantTurns(req) == 0 {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("c1", "screenshot", `{}`)}}, nil
		}
		seen = req.Messages[len(req.Messages)-1].Content
		return &llm.Response{Content: "done"}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "a", Model: model, Tools: []stepwise.Tool{shot}})
	r, err := e.StartRun(t.Context(), stepwise.StartParams{Agent: "a", Input: "shoot"})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Execute(t.Context(), r.ID) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen != "took a screenshot" {
		t.Errorf("the model saw %q", seen)
	}
	var ts *stepwise.Step
	for _, s := range steps(t, st, r.SessionID) {
		if s.Kind == "tool" {
			ts = s
		}
	}
	if ts == nil {
		t.Fatal("no tool step")
	}
	if n, _ := ts.Metadata["screenshots"].(float64); n != 1 {
		t.Errorf("step metadata screenshots = %v, want 1 (%v)", ts.Metadata["screenshots"], ts.Metadata)
	}
	atts, err := st.AttachmentList(t.Context(), &store.AttachmentListParams{StepID: ts.ID})
	if err != nil || len(atts) != 2 {
		t.Fatalf("attachments of the tool step: %+v, %v; want 2", atts, err)
	}
	a, b := atts[0], atts[1]
	if a.Name != "page.png" || a.Kind != "screenshot" || a.ContentType != "image/png" || a.Size != int64(len(pngHeader)) ||
		b.Kind != "file" || b.ContentType != "text/plain" || b.Name == "" {
		t.Errorf("attachments: %+v / %+v", a, b)
	}
	blob, err := st.BlobGet(t.Context(), &store.BlobGetParams{Hash: a.BlobHash})
	if err != nil || !bytes.Equal(blob.Data, pngHeader) {
		t.Errorf("blob of the screenshot: %v", err)
	}
}
