// Package progress draws a one-line progress bar on a terminal. When the
// output is not a terminal it stays silent, so logs and pipes stay clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Bar is a progress bar for a known number of steps. It is safe for
// concurrent use.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer // nil when silent
	total int
	done  int
	start time.Time
	label string
}

// New returns a bar over total steps that draws on w if w is a terminal.
func New(w io.Writer, total int) *Bar {
	b := &Bar{total: max(total, 1), start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.w = w
	}
	return b
}

// Step marks one step done and names the next one.
func (b *Bar) Step(label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = min(b.done+1, b.total)
	b.label = label
	b.draw()
}

// Label names the step under way without advancing.
func (b *Bar) Label(label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.label = label
	b.draw()
}

// Finish clears the bar's line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

func (b *Bar) draw() {
	if b.w == nil {
		return
	}
	const width = 24
	filled := width * b.done / b.total
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %d/%d %s (%s)", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		b.done, b.total, b.label, time.Since(b.start).Round(100*time.Millisecond))
}
