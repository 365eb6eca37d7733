// Package units reads and writes the quantities people type and read:
// durations (ParseDuration, ParseWalltime: Go's and Slurm's forms;
// FormatDuration: "1h30m", FormatElapsed: a table's "2h05m"), ages
// (ParseAge, FormatAge: days and weeks too), sizes (ParseMem, ParseBytes:
// Slurm's suffixes, binary multiples; FormatMem, FormatBytes: IEC units),
// lists of ints (Ranges: "0-3,5") and plurals (Plural). Every command,
// the inventory's policy and the planner's reasons use it, so a value is
// read and printed one way everywhere.
//
// It imports only the standard library.
package units
