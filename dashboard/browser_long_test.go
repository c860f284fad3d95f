package dashboard_test

import (
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise/internal/bench"
)

// TestLongSessionPageReadsWindows opens a session of 3,000 steps and ~600
// runs and checks every API read the page makes until its first rows are
// on screen: each is bounded whatever the session's length (a window of
// at most 200 steps, one step, the newest runs with a limit, the session
// row, the fork tree, the pending inputs, the agents, the event stream
// from the last step). A read of every step or every run fails it.
func TestLongSessionPageReadsWindows(t *testing.T) {
	var mu sync.Mutex
	var reqs []*url.URL
	e := newEnvWith(t, envOptions{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				mu.Lock()
				reqs = append(reqs, r.URL)
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}})
	res, err := bench.Fill(t.Context(), e.st, bench.FillConfig{Sessions: 0, LongSession: 3000, Agents: 1, Now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.LongSessionID
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id))
	p.waitJS(`window.__stepwiseFirstRender`)
	// The runs and the pending inputs are read after the first rows.
	for deadline := time.Now().Add(15 * time.Second); ; {
		mu.Lock()
		done := 0
		for _, u := range reqs {
			if strings.HasSuffix(u.Path, "/runs") || u.Path == "/v1/inputs" {
				done++
			}
		}
		mu.Unlock()
		if done >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the page never read the session's runs and the pending inputs")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	mu.Lock()
	defer mu.Unlock()
	base := "/v1/sessions/" + id
	seen := map[string]bool{}
	for _, u := range reqs {
		q := u.Query()
		kind := u.Path
		switch {
		case u.Path == base, u.Path == base+"/tree", u.Path == "/v1/inputs", u.Path == "/v1/agents":
		case u.Path == base+"/runs":
			if l, _ := strconv.Atoi(q.Get("limit")); l < 1 || l > 100 {
				t.Errorf("%s: every run of the session (want limit 1..100)", u)
			}
		case u.Path == base+"/steps":
			from, _ := strconv.ParseInt(q.Get("start_seq"), 10, 64)
			to, _ := strconv.ParseInt(q.Get("end_seq"), 10, 64)
			if from < 1 || to < from || to-from >= 200 {
				t.Errorf("%s: not a window of at most 200 steps", u)
			}
		case path.Dir(u.Path) == base+"/steps":
			kind = base + "/steps/N"
		case strings.HasPrefix(u.Path, "/v1/steps/"): // the selected step's evals, attachments, events
			kind = "/v1/steps/ID"
		case u.Path == base+"/events": // from the last step on (its position is a header)
		default:
			t.Errorf("unexpected read %s", u)
		}
		seen[kind] = true
	}
	for _, want := range []string{base, base + "/runs", base + "/steps"} {
		if !seen[want] {
			t.Errorf("the page did not read %s (reads: %v)", want, reqs)
		}
	}
}
