package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/tool"
)

// FilesConfig configures [NewFiles].
type FilesConfig struct {
	// Root is the directory the tools may use; required. Every path the
	// model gives is relative to it. Absolute paths, ".." components that
	// climb out of it and symbolic links leading outside it (or absolute
	// symbolic links) are refused.
	Root string
	// Prefix starts the tool names: Prefix+"read", Prefix+"write",
	// Prefix+"list". Default "files_".
	Prefix string
	// MaxReadBytes is the most a read returns; longer files are cut and
	// marked truncated. Default 1 MiB.
	MaxReadBytes int64
	// MaxWriteBytes is the largest content one write accepts, and the
	// largest size a file may reach by appending. Default 1 MiB.
	MaxWriteBytes int64
	// MaxListEntries is the most entries a listing returns; longer listings
	// are marked truncated. Default 1000.
	MaxListEntries int
	// ReadOnly leaves out the write tool.
	ReadOnly bool
	// JournalDir keeps the append journal: a write with append under a
	// call's idempotency key records there where it starts, so that the
	// same call executed again (after a crash, before its result was
	// committed) appends nothing the second time. Entries are kept 7 days.
	// Default a directory of Root's own under os.UserCacheDir (else
	// os.TempDir).
	JournalDir string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c FilesConfig) WithDefaults() FilesConfig {
	if c.Prefix == "" {
		c.Prefix = "files_"
	}
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = 1 << 20
	}
	if c.MaxWriteBytes == 0 {
		c.MaxWriteBytes = 1 << 20
	}
	if c.MaxListEntries == 0 {
		c.MaxListEntries = 1000
	}
	return c
}

func (c FilesConfig) validate() error {
	if c.Root == "" {
		return errors.New("files: Root is required")
	}
	if c.MaxReadBytes < 0 || c.MaxWriteBytes < 0 || c.MaxListEntries < 0 {
		return errors.New("files: limits must not be negative")
	}
	fi, err := os.Stat(c.Root)
	if err != nil {
		return fmt.Errorf("files: root: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("files: root %s is not a directory", c.Root)
	}
	return nil
}

// NewFiles returns tools to read, write and list files under cfg.Root: a
// read tool, a write tool (unless ReadOnly) and a list tool. Access goes
// through os.Root, so no path, however built, reaches outside the root.
func NewFiles(cfg FilesConfig) ([]tool.Tool, error) {
	f, err := newFiles(cfg)
	if err != nil {
		return nil, err
	}
	tools := []tool.Tool{
		tool.New(f.cfg.Prefix+"read", "Read a text file. Paths are relative to the working directory.", f.read),
	}
	if !f.cfg.ReadOnly {
		tools = append(tools, tool.New(f.cfg.Prefix+"write", "Write (or append to) a text file, creating parent directories. Paths are relative to the working directory.", f.write))
	}
	tools = append(tools, tool.New(f.cfg.Prefix+"list", "List a directory. Paths are relative to the working directory; use \".\" for the directory itself.", f.list))
	return tools, nil
}

// files holds the configuration shared by the file tools. Each call opens
// its own os.Root, so nothing stays open between calls.
type files struct {
	cfg     FilesConfig
	root    string
	journal *appendJournal
}

func newFiles(cfg FilesConfig) (*files, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("files: root: %w", err)
	}
	dir := cfg.JournalDir
	if dir == "" {
		dir = defaultJournalDir(root)
	}
	j := &appendJournal{dir: dir}
	j.prune(time.Now())
	return &files{cfg: cfg, root: root, journal: j}, nil
}

func (f *files) open() (*os.Root, error) {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return nil, tool.Permanent(fmt.Errorf("open root directory: %w", err))
	}
	return r, nil
}

// localPath checks a model-supplied path and returns it cleaned. The empty
// path and "." name the root itself.
func localPath(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("path %q is absolute; use a path relative to the working directory", p)
	}
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("path %q leads outside the working directory", p)
	}
	return filepath.Clean(p), nil
}

// pathError rewrites file system errors into messages for the model.
func pathError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("permission denied for %q", p)
	case strings.Contains(err.Error(), "path escapes from parent"):
		// os.Root refused a symbolic link that leads outside the root.
		return fmt.Errorf("path %q leads outside the working directory through a symbolic link", p)
	}
	return err
}
