package builtin

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stepwise-run/stepwise/tool"
)

// FileReadArgs are the read tool's arguments.
type FileReadArgs struct {
	Path string `json:"path" jsonschema:"file path relative to the working directory"`
}

// FileReadResult is the read tool's result.
type FileReadResult struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"` // Content is the first MaxReadBytes only
}

func (f *files) read(ctx context.Context, a FileReadArgs) (FileReadResult, error) {
	p, err := localPath(a.Path)
	if err != nil {
		return FileReadResult{}, err
	}
	r, err := f.open()
	if err != nil {
		return FileReadResult{}, err
	}
	defer r.Close()
	// Stat before opening: opening a FIFO would block.
	fi, err := r.Stat(p)
	if err != nil {
		return FileReadResult{}, pathError(a.Path, err)
	}
	if fi.IsDir() {
		return FileReadResult{}, fmt.Errorf("%q is a directory; list it instead", a.Path)
	}
	if !fi.Mode().IsRegular() {
		return FileReadResult{}, fmt.Errorf("%q is not a regular file", a.Path)
	}
	file, err := r.Open(p)
	if err != nil {
		return FileReadResult{}, pathError(a.Path, err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, f.cfg.MaxReadBytes+1))
	if err != nil {
		return FileReadResult{}, fmt.Errorf("read %q: %w", a.Path, err)
	}
	res := FileReadResult{Path: filepath.ToSlash(p), Size: fi.Size()}
	if int64(len(b)) > f.cfg.MaxReadBytes {
		b, res.Truncated = b[:f.cfg.MaxReadBytes], true
	}
	res.Content = string(b)
	return res, nil
}

// FileWriteArgs are the write tool's arguments.
type FileWriteArgs struct {
	Path    string `json:"path" jsonschema:"file path relative to the working directory"`
	Content string `json:"content" jsonschema:"text to write"`
	Append  bool   `json:"append,omitempty" jsonschema:"append to the file instead of replacing it"`
}

// FileWriteResult is the write tool's result.
type FileWriteResult struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytes_written"`
	Size         int64  `json:"size"` // the file's size afterwards
}

func (f *files) write(ctx context.Context, a FileWriteArgs) (FileWriteResult, error) {
	p, err := localPath(a.Path)
	if err != nil {
		return FileWriteResult{}, err
	}
	if p == "." {
		return FileWriteResult{}, fmt.Errorf("path %q names the working directory, not a file", a.Path)
	}
	if int64(len(a.Content)) > f.cfg.MaxWriteBytes {
		return FileWriteResult{}, fmt.Errorf("content is %d bytes, the limit is %d", len(a.Content), f.cfg.MaxWriteBytes)
	}
	r, err := f.open()
	if err != nil {
		return FileWriteResult{}, err
	}
	defer r.Close()
	if key := callKey(ctx); a.Append && key != "" {
		res, done, err := f.appendOnce(r, p, key, a.Content)
		if err != nil || done {
			return res, err
		}
	}
	if fi, err := r.Stat(p); err == nil {
		if !fi.Mode().IsRegular() {
			return FileWriteResult{}, fmt.Errorf("%q exists and is not a regular file", a.Path)
		}
		if a.Append && fi.Size()+int64(len(a.Content)) > f.cfg.MaxWriteBytes {
			return FileWriteResult{}, fmt.Errorf("appending would make %q %d bytes, the limit is %d", a.Path, fi.Size()+int64(len(a.Content)), f.cfg.MaxWriteBytes)
		}
	}
	if dir := filepath.Dir(p); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return FileWriteResult{}, pathError(filepath.ToSlash(dir), err)
		}
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if a.Append {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	file, err := r.OpenFile(p, flag, 0o644)
	if err != nil {
		return FileWriteResult{}, pathError(a.Path, err)
	}
	n, err := file.WriteString(a.Content)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileWriteResult{}, fmt.Errorf("write %q: %w", a.Path, err)
	}
	res := FileWriteResult{Path: filepath.ToSlash(p), BytesWritten: n}
	if fi, err := r.Stat(p); err == nil {
		res.Size = fi.Size()
	}
	return res, nil
}

// callKey returns the idempotency key of the call being executed.
func callKey(ctx context.Context) string {
	if c, ok := tool.CallFrom(ctx); ok {
		return c.IdempotencyKey
	}
	return ""
}

// appendOnce looks up the journal entry of a keyed append to p: when the
// same call has appended already, it returns that append's result with
// done set. Otherwise it records where the append starts, before the
// caller appends.
func (f *files) appendOnce(r *os.Root, p, key, content string) (FileWriteResult, bool, error) {
	e, found, err := f.journal.lookup(key, p)
	if err != nil {
		return FileWriteResult{}, false, err
	}
	var size int64
	if file, err := r.Open(p); err == nil {
		fi, serr := file.Stat()
		if serr == nil && fi.Mode().IsRegular() {
			size = fi.Size()
			if found && e.Length == int64(len(content)) && e.Sum == contentSum(content) && appended(file, size, e) {
				file.Close()
				return FileWriteResult{Path: filepath.ToSlash(p), BytesWritten: len(content), Size: size}, true, nil
			}
		}
		file.Close()
	}
	return FileWriteResult{}, false, f.journal.record(key, p, appendEntry{Offset: size, Length: int64(len(content)), Sum: contentSum(content)})
}

// FileListArgs are the list tool's arguments.
type FileListArgs struct {
	Path string `json:"path,omitempty" jsonschema:"directory path relative to the working directory; default the working directory itself"`
}

// FileEntry is one entry of a listing.
type FileEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file", "dir", "symlink" or "other"
	Size int64  `json:"size,omitempty"`
}

// FileListResult is the list tool's result, sorted by name.
type FileListResult struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated,omitempty"` // more than MaxListEntries entries
}

func (f *files) list(ctx context.Context, a FileListArgs) (FileListResult, error) {
	p, err := localPath(a.Path)
	if err != nil {
		return FileListResult{}, err
	}
	r, err := f.open()
	if err != nil {
		return FileListResult{}, err
	}
	defer r.Close()
	fi, err := r.Stat(p)
	if err != nil {
		return FileListResult{}, pathError(a.Path, err)
	}
	if !fi.IsDir() {
		return FileListResult{}, fmt.Errorf("%q is not a directory", a.Path)
	}
	dir, err := r.Open(p)
	if err != nil {
		return FileListResult{}, pathError(a.Path, err)
	}
	defer dir.Close()
	des, err := dir.ReadDir(f.cfg.MaxListEntries + 1)
	if err != nil && err != io.EOF {
		return FileListResult{}, fmt.Errorf("list %q: %w", a.Path, err)
	}
	res := FileListResult{Path: filepath.ToSlash(p), Entries: []FileEntry{}}
	if len(des) > f.cfg.MaxListEntries {
		des, res.Truncated = des[:f.cfg.MaxListEntries], true
	}
	for _, de := range des {
		e := FileEntry{Name: de.Name(), Type: "other"}
		switch t := de.Type(); {
		case t.IsDir():
			e.Type = "dir"
		case t&os.ModeSymlink != 0:
			e.Type = "symlink"
		case t.IsRegular():
			e.Type = "file"
			if info, err := de.Info(); err == nil {
				e.Size = info.Size()
			}
		}
		res.Entries = append(res.Entries, e)
	}
	sort.Slice(res.Entries, func(i, j int) bool { return strings.Compare(res.Entries[i].Name, res.Entries[j].Name) < 0 })
	return res, nil
}
