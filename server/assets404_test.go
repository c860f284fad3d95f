package server

import "testing"

// A path under /assets/ that is no asset is a problem+json 404 like any
// unknown route; real assets are unaffected.
func TestAssetNotFoundIsProblem(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	code, b := e.do(t, "GET", "/assets/js/nope.js", "")
	if code != 404 || problemCode(t, b) != CodeRouteNotFound {
		t.Fatalf("GET /assets/js/nope.js = %d %s", code, b)
	}
	if code, b := e.do(t, "GET", "/assets/js/api.js", ""); code != 200 || len(b) < 100 {
		t.Fatalf("GET /assets/js/api.js = %d (%d bytes)", code, len(b))
	}
}
