package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows long work on stderr (github.com/schollz/progressbar):
// a bar of done / total, or with total -1 a spinner with the time
// elapsed. It draws only when stderr is a terminal and the command was
// not given --quiet: otherwise every method does nothing, so callers
// need not ask. Safe for concurrent Add (the bar locks).
type progress struct {
	bar *progressbar.ProgressBar // nil: silent
}

// stderrTTY reports whether a's stderr is a terminal.
func (a *app) stderrTTY() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress starts a progress display for total units of work (-1:
// unknown) described by what ("replaying 4 policies"); silent when
// quiet or stderr is not a terminal.
func (a *app) newProgress(what string, total int64, quiet bool) *progress {
	if quiet || !a.stderrTTY() {
		return &progress{}
	}
	return newProgressTo(a.stderr, what, total)
}

// newProgressTo draws on w whatever it is (a test's pseudo-terminal).
func newProgressTo(w io.Writer, what string, total int64) *progress {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	}
	if total > 0 {
		opts = append(opts, progressbar.OptionShowCount()) // a spinner has nothing to count
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

// Add counts n more units done (0: draw it again, after Clear).
func (p *progress) Add(n int) {
	if p.bar != nil {
		p.bar.Add(n)
	}
}

// Describe changes what the display says is being done.
func (p *progress) Describe(what string) {
	if p.bar != nil {
		p.bar.Describe(what)
	}
}

// Clear takes the display off its line, for a message to be printed
// there; the next Add draws it again below.
func (p *progress) Clear() {
	if p.bar != nil {
		p.bar.Clear()
	}
}

// Done clears the display, leaving the terminal's line as it was.
func (p *progress) Done() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Exit()
	}
}
