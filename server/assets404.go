package server

import "net/http"

// problemNotFound serves next, except that its 404s (a path under /assets/
// that is no asset) are answered as problem+json route_not_found, like any
// other unknown path.
func problemNotFound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&notFoundWriter{ResponseWriter: w}, r)
	})
}

// notFoundWriter replaces a 404 response by a problem.
type notFoundWriter struct {
	http.ResponseWriter
	swallow bool // the 404 body of next is dropped
}

func (w *notFoundWriter) WriteHeader(status int) {
	if status == http.StatusNotFound {
		w.swallow = true
		h := w.Header()
		h.Del("Content-Length")
		writeProblem(w.ResponseWriter, newProblem(http.StatusNotFound, CodeRouteNotFound, "no such asset"))
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *notFoundWriter) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
