package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/wire"
)

// obsMaxSize is the attachment limit of the server: observe's default.
const obsMaxSize = 10 << 20

// obsEnv is a server with the observation endpoints over st, on a
// loopback httptest server.
type obsEnv struct {
	t   *testing.T
	st  store.Store
	eng *stepwise.Engine
	url string
}

// setup runs on the engine before the server starts its background
// executor (runs started with Engine.Run execute inline).
func newObsEnv(t *testing.T, st store.Store, setup func(*stepwise.Engine), agents ...*stepwise.Agent) *obsEnv {
	t.Helper()
	eng, err := stepwise.New(stepwise.Config{Store: st, Agents: agents, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(eng)
	}
	srv, err := New(Config{Engine: eng, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv.registerObservationAPI()
	srv.registerObservationAPI() // again: routes already there are skipped
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); _ = eng.Close() })
	return &obsEnv{t: t, st: st, eng: eng, url: ts.URL}
}

// forObsStores runs fn in parallel subtests over a memory and a SQLite
// store.
func forObsStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var st store.Store = memory.New()
			if name == "sqlite" {
				var err error
				if st, err = sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "obs.db")}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { st.Close() })
			fn(t, st)
		})
	}
}

// do sends a request with a body of the given type ("" for none).
func (e *obsEnv) do(method, path, ctype string, body []byte) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 && res.StatusCode != http.StatusNotImplemented {
		e.t.Errorf("%s %s: %d %s", method, path, res.StatusCode, data)
	}
	return res, data
}

// want sends a request and checks its status; a problem's code too when
// code is set.
func (e *obsEnv) want(status int, code, method, path, ctype string, body []byte) []byte {
	e.t.Helper()
	res, data := e.do(method, path, ctype, body)
	if res.StatusCode != status {
		e.t.Fatalf("%s %s: status %d %s, want %d", method, path, res.StatusCode, data, status)
	}
	if code != "" {
		var p Problem
		if err := json.Unmarshal(data, &p); err != nil || p.Code != code || p.Status != status || res.Header.Get("Content-Type") != "application/problem+json" {
			e.t.Fatalf("%s %s: problem %s (%s), want code %s", method, path, data, res.Header.Get("Content-Type"), code)
		}
	}
	return data
}

// chatEnv is an obsEnv whose chat agent has run once; it returns the
// run's last step.
func chatEnv(t *testing.T, st store.Store) (*obsEnv, *stepwise.Step) {
	t.Helper()
	var step *stepwise.Step
	env := newObsEnv(t, st, func(eng *stepwise.Engine) {
		run, err := eng.Wait(t.Context(), eng.Run(t.Context(), stepwise.StartParams{Agent: "chat", Input: "hello"}))
		if err != nil {
			t.Fatal(err)
		}
		steps, err := st.StepList(t.Context(), &store.StepListParams{SessionID: run.SessionID, RunID: run.ID})
		if err != nil || len(steps) == 0 {
			t.Fatalf("steps of run %s: %v, %d", run.ID, err, len(steps))
		}
		step = steps[len(steps)-1]
	}, chatAgent("chat", "hi there"))
	return env, step
}

func TestObservationEvals(t *testing.T) {
	t.Parallel()
	forObsStores(t, func(t *testing.T, st store.Store) {
		env, step := chatEnv(t, st)
		path := "/v1/steps/" + step.ID + "/evals"

		env.want(422, CodeInvalidArgument, "POST", path, "application/json", []byte(`{"score":1.5,"label":"too high"}`))
		env.want(422, CodeInvalidArgument, "POST", path, "application/json", []byte(`{"score":-0.1}`))
		env.want(422, CodeInvalidArgument, "POST", path, "application/json", []byte(`{"label":"no score"}`))
		env.want(422, CodeInvalidArgument, "POST", path, "application/json", []byte(`{"score":1,"source":"heuristic"}`))
		env.want(400, CodeInvalidJSON, "POST", path, "application/json", []byte(`{"score":1,"bogus":true}`))
		list := decode[wire.EvalList](t, env.want(200, "", "GET", path, "", nil))
		if len(list.Evals) != 0 {
			t.Fatalf("refused scores were stored: %+v", list.Evals)
		}

		// The dashboard's body: name, source, score, label, description.
		got := decode[store.Eval](t, env.want(201, "", "POST", path, "application/json",
			[]byte(`{"name":"user","source":"user","score":0.75,"label":"good","description":"right tool"}`)))
		if got.Score != 0.75 || got.Label != "good" || got.Source != store.SourceUser || got.TargetID != step.ID || got.SessionID != step.SessionID {
			t.Fatalf("eval = %+v", got)
		}
		list = decode[wire.EvalList](t, env.want(200, "", "GET", path, "", nil))
		if len(list.Evals) != 1 || list.Evals[0].ID != got.ID || list.Evals[0].Description != "right tool" {
			t.Fatalf("evals = %+v", list.Evals)
		}

		// Run and session evals; the run's list includes its steps' evals.
		env.want(201, "", "POST", "/v1/runs/"+step.RunID+"/evals", "application/json", []byte(`{"name":"helpful","score":1}`))
		env.want(201, "", "POST", "/v1/sessions/"+step.SessionID+"/evals", "application/json", []byte(`{"score":0}`))
		if l := decode[wire.EvalList](t, env.want(200, "", "GET", "/v1/runs/"+step.RunID+"/evals", "", nil)); len(l.Evals) != 2 {
			t.Fatalf("run evals = %+v", l.Evals)
		}
		if l := decode[wire.EvalList](t, env.want(200, "", "GET", "/v1/sessions/"+step.SessionID+"/evals?name=user", "", nil)); len(l.Evals) != 2 {
			t.Fatalf("session evals named user = %+v", l.Evals)
		}

		for _, p := range []string{"/v1/steps/nope/evals", "/v1/runs/nope/evals", "/v1/sessions/nope/evals"} {
			env.want(404, CodeNotFound, "GET", p, "", nil)
			env.want(404, CodeNotFound, "POST", p, "application/json", []byte(`{"score":1}`))
		}
	})
}

// pngImage returns a w×h PNG.
func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// multipartFile builds a multipart body with a file part.
func multipartFile(t *testing.T, name, ctype string, data []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, name)}
	h["Content-Type"] = []string{ctype}
	part, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write(data)
	_ = mw.WriteField("kind", "screenshot")
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

func TestObservationAttachments(t *testing.T) {
	t.Parallel()
	forObsStores(t, func(t *testing.T, st store.Store) {
		env, step := chatEnv(t, st)
		path := "/v1/steps/" + step.ID + "/attachments"
		img := pngImage(t, 40, 30)

		// Multipart, as a browser sends it (octet-stream declares nothing).
		body, ctype := multipartFile(t, "shot.png", "application/octet-stream", img)
		att := decode[store.Attachment](t, env.want(201, "", "POST", path, ctype, body))
		if att.ContentType != "image/png" || att.Kind != "screenshot" || att.Name != "shot.png" || att.Size != int64(len(img)) {
			t.Fatalf("attachment = %+v", att)
		}
		res, data := env.do("GET", "/v1/attachments/"+att.ID+"/content", "", nil)
		if res.StatusCode != 200 || !bytes.Equal(data, img) || res.Header.Get("Content-Type") != "image/png" ||
			res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "inline") {
			t.Fatalf("content: %d %v (%d bytes)", res.StatusCode, res.Header, len(data))
		}

		// Raw body; text is served as a download.
		txt := decode[store.Attachment](t, env.want(201, "", "POST", path+"?name=notes.txt", "text/plain", []byte("plain notes")))
		res, data = env.do("GET", "/v1/attachments/"+txt.ID+"/content", "", nil)
		if string(data) != "plain notes" || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment;") ||
			!strings.Contains(res.Header.Get("Content-Disposition"), "notes.txt") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("text content: %q %v", data, res.Header)
		}
		list := decode[wire.AttachmentList](t, env.want(200, "", "GET", path, "", nil))
		if len(list.Attachments) != 2 || list.Attachments[0].ID != att.ID {
			t.Fatalf("attachments = %+v", list.Attachments)
		}

		// Refused: too large, HTML (raw, multipart, or hidden behind a
		// text/plain declaration), a declaration the content contradicts.
		big := bytes.Repeat([]byte("a"), obsMaxSize+1)
		env.want(413, CodeBodyTooLarge, "POST", path+"?name=big.txt", "text/plain", big)
		body, ctype = multipartFile(t, "big.txt", "text/plain", big)
		env.want(413, CodeBodyTooLarge, "POST", path, ctype, body)
		page := []byte("<!doctype html><html><script>alert(1)</script></html>")
		env.want(415, CodeUnsupportedType, "POST", path+"?name=x.html", "text/html", page)
		env.want(415, CodeUnsupportedType, "POST", path+"?name=x.txt", "text/plain", page)
		body, ctype = multipartFile(t, "x.html", "text/html", page)
		env.want(415, CodeUnsupportedType, "POST", path, ctype, body)
		env.want(415, CodeUnsupportedType, "POST", path, "image/jpeg", img)
		env.want(422, CodeInvalidArgument, "POST", path, "text/plain", []byte{})
		if l := decode[wire.AttachmentList](t, env.want(200, "", "GET", path, "", nil)); len(l.Attachments) != 2 {
			t.Fatalf("refused uploads were stored: %+v", l.Attachments)
		}

		env.want(404, CodeNotFound, "GET", "/v1/attachments/nope/content", "", nil)
		env.want(404, CodeNotFound, "GET", "/v1/steps/nope/attachments", "", nil)
		env.want(404, CodeNotFound, "POST", "/v1/steps/nope/attachments", "text/plain", []byte("x"))
	})
}

func TestObservationEventsAndAnnotations(t *testing.T) {
	t.Parallel()
	forObsStores(t, func(t *testing.T, st store.Store) {
		env, step := chatEnv(t, st)
		large := `{"body":"` + strings.Repeat("x", store.InlinePayloadLimit+10) + `"}`
		if _, err := st.StepEventAppend(t.Context(), &store.StepEventAppendParams{Events: []*store.StepEvent{
			{ID: stepwise.NewID(), StepID: step.ID, Type: "provider_request", Payload: json.RawMessage(`{"model":"m"}`)},
			{ID: stepwise.NewID(), StepID: step.ID, Type: "http", Name: "POST /v1/chat", Payload: json.RawMessage(large)},
		}}); err != nil {
			t.Fatal(err)
		}
		evs := decode[wire.StepEventList](t, env.want(200, "", "GET", "/v1/steps/"+step.ID+"/events", "", nil))
		if len(evs.Events) != 2 || evs.Events[0].Type != "provider_request" || string(evs.Events[0].Payload) != `{"model":"m"}` ||
			evs.Events[1].Index != 1 || evs.Events[1].BlobHash == "" || string(evs.Events[1].Payload) != large {
			t.Fatalf("events = %+v", evs.Events)
		}
		if only := decode[wire.StepEventList](t, env.want(200, "", "GET", "/v1/steps/"+step.ID+"/events?type=http", "", nil)); len(only.Events) != 1 {
			t.Fatalf("http events = %+v", only.Events)
		}
		env.want(404, CodeNotFound, "GET", "/v1/steps/nope/events", "", nil)

		path := "/v1/steps/" + step.ID + "/annotations"
		got := decode[wire.AnnotationView](t, env.want(200, "", "PUT", path, "application/json", []byte(`{"state":"greeting","goal":"answer"}`)))
		if got.Annotations.State != "greeting" || got.Annotations.Goal != "answer" {
			t.Fatalf("annotations = %+v", got)
		}
		got = decode[wire.AnnotationView](t, env.want(200, "", "PUT", path, "application/json", []byte(`{"action":"reply"}`)))
		if got.Annotations.State != "greeting" || got.Annotations.Action != "reply" {
			t.Fatalf("merged annotations = %+v", got)
		}
		env.want(422, CodeInvalidArgument, "PUT", path, "application/json", []byte(`{}`))
		env.want(400, CodeInvalidJSON, "PUT", path, "application/json", []byte(`{"state":1}`))
		if read := decode[wire.AnnotationView](t, env.want(200, "", "GET", path, "", nil)); read.Annotations != got.Annotations || read.StepID != step.ID {
			t.Fatalf("read annotations = %+v", read)
		}
		env.want(404, CodeNotFound, "GET", "/v1/steps/nope/annotations", "", nil)
		env.want(404, CodeNotFound, "PUT", "/v1/steps/nope/annotations", "application/json", []byte(`{"state":"s"}`))
	})
}
