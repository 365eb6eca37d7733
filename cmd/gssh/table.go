package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// printTable writes rows under header: aligned columns without colour on a
// terminal (two spaces between columns, none at a line's end), plain
// tab-separated lines otherwise (for scripts and pipes).
// The error is a write error (a closed pipe) or tablewriter's.
func printTable(w io.Writer, tty bool, header []string, rows [][]string) error {
	if !tty {
		var b strings.Builder
		b.WriteString(strings.Join(header, "\t") + "\n")
		for _, r := range rows {
			b.WriteString(strings.Join(r, "\t") + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	// tablewriter pads every cell, the last column's too: its lines are
	// trimmed of the spaces at their ends before they are written.
	var b strings.Builder
	t := tablewriter.NewTable(&b,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off}, Lines: tw.Lines{ShowHeaderLine: tw.Off}},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
		tablewriter.WithPadding(tw.Padding{Left: tw.Empty, Right: "  ", Overwrite: true}),
	)
	t.Header(toAny(header)...)
	for _, r := range rows {
		if err := t.Append(toAny(r)...); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	trimmed := make([]byte, 0, b.Len())
	for l := range strings.Lines(b.String()) {
		trimmed = append(append(trimmed, strings.TrimRight(l, " \n")...), '\n')
	}
	_, err := w.Write(trimmed)
	return err
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
