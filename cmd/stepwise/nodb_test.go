package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A read command on a database that does not exist yet says so and how to
// create one, instead of a raw stat error, and creates nothing.
func TestReadCommandsWithoutDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "none.db"), filepath.Join(dir, "no", "such", "dir", "x.db")} {
		for _, args := range [][]string{{"sessions"}, {"steps", "s1"}, {"trace", "s1"}, {"summary", "s1"}, {"forks", "s1"},
			{"inputs"}, {"metrics"}, {"search", "hello"}} {
			_, errOut, code := stepwise(t, dir, append([]string{"--db", "sqlite:" + path}, args...)...)
			want := "no database at " + path + " yet; create one with `stepwise run"
			if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "`stepwise serve") || strings.Contains(errOut, "stat ") {
				t.Errorf("%v on %s: exit %d, stderr %q; want exit 1 with %q", args, path, code, errOut, want)
			}
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("a read command created %s: %v", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Fatalf("a read command created a directory: %v", err)
	}
}
