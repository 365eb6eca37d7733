package units

// Plural is one when n is 1, else many: Plural(n, "job", "jobs"),
// Plural(n, "entry", "entries"), Plural(n, "was", "were"). Zero and
// negative counts take many ("0 jobs").
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
