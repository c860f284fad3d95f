package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// Dataset errors.
var (
	// ErrMalformedLine is wrapped by every LineError.
	ErrMalformedLine = errors.New("stepwise: malformed dataset line")
	// ErrEmptyDataset: no line of the input was a valid item; nothing was
	// created.
	ErrEmptyDataset = errors.New("stepwise: dataset has no valid item")
)

// LineError reports a line of a JSONL file that was not imported.
type LineError struct {
	Line int // 1-based
	Err  error
}

// Error returns "line N: cause".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns ErrMalformedLine and the cause.
func (e *LineError) Unwrap() []error { return []error{ErrMalformedLine, e.Err} }

// ImportParams name the dataset an import creates.
type ImportParams struct {
	// Name is unique among datasets. Required.
	Name        string
	Description string
	// ID defaults to a new id.
	ID string
	// MaxLineBytes bounds one line; longer lines are reported. Default 1 MiB.
	MaxLineBytes int
}

// ImportResult is what an import did.
type ImportResult struct {
	Dataset  *store.Dataset
	Imported int
	// Errors are the lines left out, in order.
	Errors []*LineError
}

// line is the JSONL format of one item.
type line struct {
	Input    *string         `json:"input"`
	Expected json.RawMessage `json:"expected"`
	Metadata json.RawMessage `json:"metadata"`
}

// ParseJSONL reads dataset items from JSONL: one JSON object per line with
// "input" (a non-empty string, required), "expected" (the expected output:
// a string, or any JSON value kept as JSON text) and "metadata" (an
// object). Blank lines are skipped. A malformed line (invalid JSON, unknown
// field, missing input, too long) is reported with its line number and the
// others are kept. The error is for reading r only.
func ParseJSONL(r io.Reader, maxLine int) ([]*store.DatasetItem, []*LineError, error) {
	if maxLine <= 0 {
		maxLine = 1 << 20
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var items []*store.DatasetItem
	var errs []*LineError
	for n := 1; ; n++ {
		raw, tooLong, err := readLine(br, maxLine)
		if err != nil && err != io.EOF {
			return nil, nil, fmt.Errorf("read dataset: %w", err)
		}
		if tooLong {
			errs = append(errs, &LineError{Line: n, Err: fmt.Errorf("longer than %d bytes", maxLine)})
		} else if len(bytes.TrimSpace(raw)) > 0 {
			it, perr := parseLine(raw)
			if perr != nil {
				errs = append(errs, &LineError{Line: n, Err: perr})
			} else {
				items = append(items, it)
			}
		}
		if err == io.EOF {
			return items, errs, nil
		}
	}
}

// readLine reads one line without its end; a line longer than max is
// consumed and reported as tooLong.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+2 { // the end of line is not content
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil || (err == io.EOF && (len(line) > 0 || tooLong)) {
			line = bytes.TrimRight(line, "\r\n")
			if err == io.EOF {
				return line, tooLong, io.EOF
			}
			return line, tooLong, nil
		}
		return line, tooLong, err
	}
}

func parseLine(raw []byte) (*store.DatasetItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var l line
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("invalid JSON object: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	if l.Input == nil || strings.TrimSpace(*l.Input) == "" {
		return nil, errors.New(`"input" is missing or empty: want a non-empty string`)
	}
	it := &store.DatasetItem{Input: *l.Input}
	if len(l.Expected) > 0 && string(l.Expected) != "null" {
		var s string
		if json.Unmarshal(l.Expected, &s) == nil {
			it.Expected = s
		} else {
			it.Expected = string(l.Expected)
		}
	}
	if len(l.Metadata) > 0 && string(l.Metadata) != "null" {
		if l.Metadata[0] != '{' {
			return nil, errors.New(`"metadata" must be an object`)
		}
		it.Metadata = l.Metadata
	}
	return it, nil
}

// ImportJSONL creates a dataset from JSONL (see ParseJSONL). Malformed
// lines are reported in the result and the rest is imported; when no line
// is valid nothing is created and the error wraps ErrEmptyDataset. A name
// already taken fails with store.ErrConflict.
func ImportJSONL(ctx context.Context, st store.Store, r io.Reader, p ImportParams) (*ImportResult, error) {
	obs, err := observations(st)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Name) == "" {
		return nil, fmt.Errorf("%w: dataset name is required", store.ErrInvalid)
	}
	items, lineErrs, err := ParseJSONL(r, p.MaxLineBytes)
	if err != nil {
		return nil, err
	}
	res := &ImportResult{Errors: lineErrs}
	if len(items) == 0 {
		return res, fmt.Errorf("%w (%d malformed lines)", ErrEmptyDataset, len(lineErrs))
	}
	if p.ID == "" {
		p.ID = stepwise.NewID()
	}
	ds, err := obs.DatasetCreate(ctx, &store.DatasetCreateParams{
		Dataset: &store.Dataset{ID: p.ID, Name: p.Name, Description: p.Description}, Items: items,
	})
	if err != nil {
		return res, fmt.Errorf("create dataset %q: %w", p.Name, err)
	}
	res.Dataset, res.Imported = ds, len(items)
	return res, nil
}
