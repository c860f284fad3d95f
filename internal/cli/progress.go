package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/store/transfer"
)

// progressBar shows a copy's progress on stderr: on a terminal one line
// redrawn in place, otherwise a plain line every few seconds.
type progressBar struct {
	w     io.Writer
	tty   bool
	last  time.Time
	shown bool // a redrawable line is on screen
	every time.Duration
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w, tty: isTerminal(w), every: 5 * time.Second}
	if b.tty {
		b.every = 100 * time.Millisecond
	}
	return b
}

func (b *progressBar) update(p transfer.Progress) {
	now := time.Now()
	finished := p.Sessions == p.SessionsTotal
	if now.Sub(b.last) < b.every && !finished {
		return
	}
	b.last = now
	frac := 1.0
	if p.StepsTotal > 0 {
		frac = float64(p.Steps) / float64(p.StepsTotal)
	}
	rate := 0.0
	if s := now.Sub(p.Started).Seconds(); s > 0 {
		rate = float64(p.Steps) / s
	}
	line := fmt.Sprintf("%5.1f%%  %d/%d steps  %d/%d sessions  %.0f steps/s",
		100*frac, p.Steps, p.StepsTotal, p.Sessions, p.SessionsTotal, rate)
	if !b.tty {
		fmt.Fprintln(b.w, "copy:", line)
		return
	}
	const width = 30
	n := min(width, int(frac*width))
	fmt.Fprintf(b.w, "\r\x1b[K[%s%s] %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), line)
	b.shown = true
}

// clear removes the redrawn line so other output starts on a clean line.
func (b *progressBar) clear() {
	if b.shown {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.shown = false
	}
}

func (b *progressBar) done() {
	if b.shown {
		fmt.Fprintln(b.w)
		b.shown = false
	}
}
