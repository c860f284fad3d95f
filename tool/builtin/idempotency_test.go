package builtin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/tool"
)

// callWithKey calls tl with args under an idempotency key.
func callWithKey[R any](t *testing.T, tl tool.Tool, key string, args any) R {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Call(context.Background(), &tool.Call{Arguments: b, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("error result: %s", res.Content)
	}
	var out R
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// An append re-executed under the same idempotency key (a crash before its
// result was committed) appends once and returns the first result; another
// key, or no key, appends again.
func TestFilesAppendIdempotent(t *testing.T) {
	t.Parallel()
	journal := t.TempDir()
	tools, root, _ := fileTools(t, FilesConfig{JournalDir: journal})
	w := tools["files_write"]
	read := func() string {
		b, err := os.ReadFile(filepath.Join(root, "log.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := callWithKey[FileWriteResult](t, w, "run1/call1", FileWriteArgs{Path: "log.txt", Content: "one\n", Append: true})
	again := callWithKey[FileWriteResult](t, w, "run1/call1", FileWriteArgs{Path: "log.txt", Content: "one\n", Append: true})
	if got := read(); got != "one\n" {
		t.Fatalf("re-executed append: file %q, want one line", got)
	}
	if again != first {
		t.Fatalf("re-executed append returned %+v, first %+v", again, first)
	}
	callWithKey[FileWriteResult](t, w, "run1/call2", FileWriteArgs{Path: "log.txt", Content: "two\n", Append: true})
	callWithKey[FileWriteResult](t, w, "run1/call2", FileWriteArgs{Path: "log.txt", Content: "two\n", Append: true})
	callWithKey[FileWriteResult](t, w, "", FileWriteArgs{Path: "log.txt", Content: "x\n", Append: true})
	callWithKey[FileWriteResult](t, w, "", FileWriteArgs{Path: "log.txt", Content: "x\n", Append: true})
	if got := read(); got != "one\ntwo\nx\nx\n" {
		t.Fatalf("file %q", got)
	}
	// A crash after the journal entry but before the append: the entry
	// names the size before, so the re-execution appends.
	root2 := t.TempDir()
	fs, err := newFiles(FilesConfig{Root: root2, JournalDir: journal})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root2, "log.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.journal.record("run2/call1", "log.txt", appendEntry{Offset: 5, Length: 4, Sum: contentSum("new\n")}); err != nil {
		t.Fatal(err)
	}
	write := func(key, content string, appendTo bool) {
		t.Helper()
		ctx := tool.WithCall(context.Background(), &tool.Call{IdempotencyKey: key})
		if _, err := fs.write(ctx, FileWriteArgs{Path: "log.txt", Content: content, Append: appendTo}); err != nil {
			t.Fatal(err)
		}
	}
	write("run2/call1", "new\n", true)
	write("run2/call1", "new\n", true)
	if b, _ := os.ReadFile(filepath.Join(root2, "log.txt")); string(b) != "base\nnew\n" {
		t.Fatalf("after a crash before the append: %q", b)
	}
	// The file rewritten since: the old entry no longer matches, and the
	// call appends to what is there.
	write("", "fresh\n", false)
	write("run2/call1", "new\n", true)
	if b, _ := os.ReadFile(filepath.Join(root2, "log.txt")); string(b) != "fresh\nnew\n" {
		t.Fatalf("after a rewrite: %q", b)
	}
}

// http_get sends the call's idempotency key as the Idempotency-Key header
// (on redirects too), and none without a key.
func TestHTTPGetIdempotencyKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/hello", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	g := newGetter(t, HTTPGetConfig{})
	callWithKey[HTTPGetResult](t, g, "run1/call7", HTTPGetArgs{URL: srv.URL + "/hello"})
	callWithKey[HTTPGetResult](t, g, "run1/call8", HTTPGetArgs{URL: srv.URL + "/redirect"})
	callWithKey[HTTPGetResult](t, g, "", HTTPGetArgs{URL: srv.URL + "/hello"})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"run1/call7", "run1/call8", "run1/call8", ""}
	if len(seen) != len(want) {
		t.Fatalf("headers %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("headers %q, want %q", seen, want)
		}
	}
}
