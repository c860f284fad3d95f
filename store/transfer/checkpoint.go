package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Checkpoint records how far a copy got: the last session, in id order,
// that it copied and verified together with every session before it.
type Checkpoint interface {
	// Load returns the last session recorded, or "" to start from the
	// beginning.
	Load() (string, error)
	// Save records after; done means the copy finished.
	Save(after string, done bool) error
}

// FileCheckpoint keeps the checkpoint of a copy from From to To in a small
// JSON file, written atomically (temporary file and rename) at most every
// Interval. The file is removed when the copy finishes.
type FileCheckpoint struct {
	Path     string
	From, To string        // recorded, and checked on Load
	Interval time.Duration // default 200ms
	last     time.Time
}

type checkpointFile struct {
	From  string    `json:"from"`
	To    string    `json:"to"`
	After string    `json:"after"`
	Saved time.Time `json:"saved"`
}

// Load implements Checkpoint.
func (f *FileCheckpoint) Load() (string, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read checkpoint: %w", err)
	}
	var c checkpointFile
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("checkpoint %s is unreadable (%v); remove it to copy from the start", f.Path, err)
	}
	if c.From != f.From || c.To != f.To {
		return "", fmt.Errorf("checkpoint %s belongs to a copy from %s to %s; remove it or pass another --checkpoint", f.Path, c.From, c.To)
	}
	return c.After, nil
}

// Save implements Checkpoint.
func (f *FileCheckpoint) Save(after string, done bool) error {
	if done {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove checkpoint: %w", err)
		}
		return nil
	}
	iv := f.Interval
	if iv == 0 {
		iv = 200 * time.Millisecond
	}
	if time.Since(f.last) < iv {
		return nil
	}
	f.last = time.Now()
	b, err := json.Marshal(checkpointFile{From: f.From, To: f.To, After: after, Saved: f.last.UTC()})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), filepath.Base(f.Path)+".*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
