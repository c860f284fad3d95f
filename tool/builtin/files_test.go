package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/tool"
)

// fileTools builds the file tools over a fresh root and returns them by
// name, the root and a directory outside it holding secret.txt.
func fileTools(t *testing.T, cfg FilesConfig) (map[string]tool.Tool, string, string) {
	t.Helper()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Root = root
	tools, err := NewFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range tools {
		byName[tl.Definition().Name] = tl
	}
	return byName, root, outside
}

func callJSON[R any](t *testing.T, tl tool.Tool, args any) (R, error) {
	t.Helper()
	var out R
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Call(context.Background(), &tool.Call{Arguments: b})
	if err != nil {
		return out, err
	}
	if res.IsError {
		t.Fatalf("error result: %s", res.Content)
	}
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}

func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	tools, root, _ := fileTools(t, FilesConfig{})
	w, err := callJSON[FileWriteResult](t, tools["files_write"], FileWriteArgs{Path: "notes/day1.txt", Content: "hello"})
	if err != nil || w.BytesWritten != 5 || w.Size != 5 || w.Path != "notes/day1.txt" {
		t.Fatalf("write: %+v, %v", w, err)
	}
	if w, err = callJSON[FileWriteResult](t, tools["files_write"], FileWriteArgs{Path: "notes/day1.txt", Content: " world", Append: true}); err != nil || w.Size != 11 {
		t.Fatalf("append: %+v, %v", w, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "notes", "day1.txt")); string(b) != "hello world" {
		t.Errorf("on disk: %q", b)
	}
	r, err := callJSON[FileReadResult](t, tools["files_read"], FileReadArgs{Path: "./notes/../notes/day1.txt"})
	if err != nil || r.Content != "hello world" || r.Size != 11 || r.Truncated {
		t.Errorf("read: %+v, %v", r, err)
	}
	if err := os.Symlink("notes/day1.txt", filepath.Join(root, "inside-link")); err != nil {
		t.Fatal(err)
	}
	if r, err = callJSON[FileReadResult](t, tools["files_read"], FileReadArgs{Path: "inside-link"}); err != nil || r.Content != "hello world" {
		t.Errorf("read through a link inside the root: %+v, %v", r, err)
	}
	l, err := callJSON[FileListResult](t, tools["files_list"], FileListArgs{})
	if err != nil {
		t.Fatal(err)
	}
	want := []FileEntry{{Name: "inside-link", Type: "symlink"}, {Name: "notes", Type: "dir"}}
	if len(l.Entries) != 2 || l.Entries[0] != want[0] || l.Entries[1] != want[1] || l.Path != "." {
		t.Errorf("list: %+v", l)
	}
	if l, err = callJSON[FileListResult](t, tools["files_list"], FileListArgs{Path: "notes"}); err != nil || len(l.Entries) != 1 || l.Entries[0] != (FileEntry{Name: "day1.txt", Type: "file", Size: 11}) {
		t.Errorf("list notes: %+v, %v", l, err)
	}
}

func TestFilesRefuseEscapes(t *testing.T) {
	t.Parallel()
	tools, root, outside := fileTools(t, FilesConfig{})
	secret := filepath.Join(outside, "secret.txt")
	must(t, os.Symlink("../outside/secret.txt", filepath.Join(root, "rel-link")))
	must(t, os.Symlink(secret, filepath.Join(root, "abs-link")))
	must(t, os.Symlink("../outside", filepath.Join(root, "dir-link")))
	for _, tc := range []struct{ path, want string }{
		{secret, "is absolute"},
		{"/etc/passwd", "is absolute"},
		{"../outside/secret.txt", "leads outside"},
		{"a/../../outside/secret.txt", "leads outside"},
		{"..", "leads outside"},
		{"rel-link", "symbolic link"},
		{"abs-link", "symbolic link"},
		{"dir-link/secret.txt", "symbolic link"},
	} {
		for _, op := range []struct {
			name string
			args any
		}{
			{"files_read", FileReadArgs{Path: tc.path}},
			{"files_write", FileWriteArgs{Path: tc.path, Content: "pwned"}},
			{"files_list", FileListArgs{Path: tc.path}},
		} {
			_, err := callJSON[json.RawMessage](t, tools[op.name], op.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %q: err = %v, want %q", op.name, tc.path, err, tc.want)
			}
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "top secret" {
		t.Errorf("file outside the root changed: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files created outside the root: %v", ents)
	}
}

func TestFilesLimits(t *testing.T) {
	t.Parallel()
	tools, root, _ := fileTools(t, FilesConfig{MaxReadBytes: 4, MaxWriteBytes: 8, MaxListEntries: 2})
	must(t, os.WriteFile(filepath.Join(root, "big.txt"), []byte("0123456789"), 0o644))
	r, err := callJSON[FileReadResult](t, tools["files_read"], FileReadArgs{Path: "big.txt"})
	if err != nil || r.Content != "0123" || !r.Truncated || r.Size != 10 {
		t.Errorf("read: %+v, %v", r, err)
	}
	_, err = callJSON[FileWriteResult](t, tools["files_write"], FileWriteArgs{Path: "new.txt", Content: "123456789"})
	if err == nil || !strings.Contains(err.Error(), "limit is 8") {
		t.Errorf("oversized write: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(root, "new.txt")); !os.IsNotExist(serr) {
		t.Error("refused write created the file")
	}
	_, err = callJSON[FileWriteResult](t, tools["files_write"], FileWriteArgs{Path: "big.txt", Content: "x", Append: true})
	if err == nil || !strings.Contains(err.Error(), "appending would make") {
		t.Errorf("append past the limit: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "big.txt")); string(b) != "0123456789" {
		t.Errorf("refused append changed the file: %q", b)
	}
	must(t, os.WriteFile(filepath.Join(root, "c.txt"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(root, "d.txt"), nil, 0o644))
	l, err := callJSON[FileListResult](t, tools["files_list"], FileListArgs{})
	if err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("list: %+v, %v", l, err)
	}
}

func TestFilesWrongKinds(t *testing.T) {
	t.Parallel()
	tools, root, _ := fileTools(t, FilesConfig{})
	must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644))
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{"files_read", FileReadArgs{Path: "d"}, "is a directory"},
		{"files_read", FileReadArgs{Path: "missing.txt"}, `"missing.txt" does not exist`},
		{"files_write", FileWriteArgs{Path: "d", Content: "x"}, "not a regular file"},
		{"files_write", FileWriteArgs{Path: ".", Content: "x"}, "names the working directory"},
		{"files_list", FileListArgs{Path: "f"}, "is not a directory"},
	} {
		if _, err := callJSON[json.RawMessage](t, tools[tc.tool], tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: err = %v, want %q", tc.tool, tc.args, err, tc.want)
		}
	}
}

func TestFilesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, cfg := range []FilesConfig{{}, {Root: filepath.Join(dir, "missing")}, {Root: file}, {Root: dir, MaxReadBytes: -1}} {
		if _, err := NewFiles(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	tools, err := NewFiles(FilesConfig{Root: dir, ReadOnly: true, Prefix: "ws_"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Definition().Name)
	}
	if strings.Join(names, ",") != "ws_read,ws_list" {
		t.Errorf("read-only tools = %v", names)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
