package builtin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// journalKeep is how long the append journal keeps an entry: far longer
// than a run's lease, after which a re-execution no longer happens.
const journalKeep = 7 * 24 * time.Hour

// appendJournal makes appends idempotent by call: before a keyed append it
// records where the append starts, so that a re-execution of the same call
// (a crash before its result was committed) finds its bytes already there
// and appends nothing.
type appendJournal struct{ dir string }

// appendEntry is what the journal keeps of one keyed append.
type appendEntry struct {
	Offset int64  `json:"offset"` // the file's size before the append
	Length int64  `json:"length"` // bytes appended
	Sum    string `json:"sum"`    // contentSum of the bytes appended
}

func contentSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// defaultJournalDir is a directory of the user's cache (else of the
// temporary directory) that belongs to root alone.
func defaultJournalDir(root string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	h := sha256.Sum256([]byte(root))
	return filepath.Join(base, "stepwise", "files-journal", hex.EncodeToString(h[:8]))
}

func (j *appendJournal) file(key, path string) string {
	h := sha256.Sum256([]byte(key + "\x00" + path))
	return filepath.Join(j.dir, hex.EncodeToString(h[:])+".json")
}

// lookup returns the entry of key and path, if any.
func (j *appendJournal) lookup(key, path string) (appendEntry, bool, error) {
	var e appendEntry
	b, err := os.ReadFile(j.file(key, path))
	if errors.Is(err, fs.ErrNotExist) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("append journal: %w", err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, false, nil // a torn entry: as if none
	}
	return e, true, nil
}

// record writes the entry of key and path durably, replacing any.
func (j *appendJournal) record(key, path string, e appendEntry) error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("append journal: %w", err)
	}
	b, _ := json.Marshal(e)
	name := j.file(key, path)
	tmp, err := os.CreateTemp(j.dir, ".entry-*")
	if err != nil {
		return fmt.Errorf("append journal: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("append journal: %w", err)
	}
	return nil
}

// prune removes entries older than journalKeep; errors are ignored (an
// entry left behind costs a few bytes).
func (j *appendJournal) prune(now time.Time) {
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if info, err := de.Info(); err == nil && strings.HasSuffix(de.Name(), ".json") && now.Sub(info.ModTime()) > journalKeep {
			_ = os.Remove(filepath.Join(j.dir, de.Name()))
		}
	}
}

// appended reports whether the bytes of entry e are in file at its offset:
// the call that recorded e has appended already.
func appended(file *os.File, size int64, e appendEntry) bool {
	if e.Offset < 0 || size < e.Offset+e.Length {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(file, e.Offset, e.Length)); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == e.Sum
}
