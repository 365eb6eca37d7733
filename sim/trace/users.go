package trace

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
)

// MaxMadeUpUsers is the most users AssignUsers makes up.
const MaxMadeUpUsers = 1000

// AssignUsers makes up users for a trace that has none: job i (0-based, in
// the order of t.Jobs, which is by submit time) gets user
// fmt.Sprintf("u%02d", i%n), so the users take turns. n must be 1 to
// 1000. It is an error if any job has a user already. It sets
// t.UsersMadeUp.
func (t *Trace) AssignUsers(n int) error {
	if n < 1 || n > MaxMadeUpUsers {
		return fmt.Errorf("%s: %d users to make up; give 1 to %d", t.label(), n, MaxMadeUpUsers)
	}
	if err := t.noUsers("making users up"); err != nil {
		return err
	}
	for i := range t.Jobs {
		t.Jobs[i].User = fmt.Sprintf("u%02d", i%n)
	}
	t.UsersMadeUp = true
	return nil
}

// noUsers is an error if a job of t has a user.
func (t *Trace) noUsers(doing string) error {
	for _, j := range t.Jobs {
		if j.User != "" {
			return fmt.Errorf("%s:%d: user: the trace has users already (%q for job %s); it is only for a trace without users that %s makes sense", t.label(), j.Line, j.User, j.ID, doing)
		}
	}
	return nil
}

// joinKeys are the raw columns UsersFrom joins on, in the order it looks
// for them, and what it puts before their values to get a Job.ID.
var joinKeys = []struct{ column, prefix string }{
	{"job", ""},
	{"job_id", ""},         // ITP (ElasticFlow)
	{"name", ""},           // Alibaba v2023
	{"src_row", "philly-"}, // Philly (Pollux), whose normalized ids are philly-<src_row>
}

// UsersFrom gives every job the value of column in the row of the raw
// trace (a CSV file, named name for messages) that the job was made from,
// as it stands there: for Philly, column "cluster" gives the virtual
// cluster such as "6214e9" (a team, not a person: call it "VC" in
// reports).
//
// Rows are joined on the first of these raw columns that the header has:
// job, job_id or name (equal to Job.ID), or src_row (Job.ID is
// "philly-<src_row>"). Raw rows that no job refers to are ignored.
//
// It is an error if the trace has users already, the raw file has no
// column named column or no column to join on, a join key appears twice,
// a job has no raw row (the error counts them and names the first), or a
// job's user would be empty. On error the trace is left as it was. It
// clears t.UsersMadeUp.
func (t *Trace) UsersFrom(name string, raw io.Reader, column string) error {
	if err := t.noUsers("taking users from " + name); err != nil {
		return err
	}
	cr := csv.NewReader(raw)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	rec, err := cr.Read()
	if err == io.EOF {
		return fmt.Errorf("%s: empty file; give the raw trace, with its header, that %s was made from", name, t.label())
	}
	if err != nil {
		return csvError(name, err)
	}
	header := cleanHeader(rec)
	userCol, keyCol, prefix := -1, -1, ""
	for i, h := range header {
		if h == column && userCol < 0 {
			userCol = i
		}
	}
	if userCol < 0 {
		return fmt.Errorf("%s:1: no column %q in the header (%s); give the raw column that holds the users, such as cluster for Philly",
			name, column, strings.Join(header, ","))
	}
	for _, k := range joinKeys {
		for i, h := range header {
			if h == k.column {
				keyCol, prefix = i, k.prefix
				break
			}
		}
		if keyCol >= 0 {
			break
		}
	}
	if keyCol < 0 {
		return fmt.Errorf("%s:1: no column to join on in the header (%s); give a raw file with a column job, job_id or name (the job id) or src_row (Philly)",
			name, strings.Join(header, ","))
	}
	keyName := header[keyCol]

	type row struct {
		user string
		line int
	}
	rows := map[string]row{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return fmt.Errorf("%s:%d: %d fields, but the header has %d; give one value per header column", name, line, len(rec), len(header))
		}
		v := strings.TrimSpace(rec[keyCol])
		if v == "" {
			return fmt.Errorf("%s:%d: %s: empty; give every row its key", name, line, keyName)
		}
		if r, ok := rows[prefix+v]; ok {
			return fmt.Errorf("%s:%d: %s: %s appears again (first at line %d); the key to join on must be unique", name, line, keyName, v, r.line)
		}
		rows[prefix+v] = row{strings.TrimSpace(rec[userCol]), line}
	}

	users := make([]string, len(t.Jobs))
	missing, first := 0, -1
	for i, j := range t.Jobs {
		r, ok := rows[j.ID]
		if !ok {
			if missing == 0 {
				first = i
			}
			missing++
			continue
		}
		if r.user == "" {
			return fmt.Errorf("%s:%d: %s: empty for job %s; give every job a user", name, r.line, column, j.ID)
		}
		users[i] = r.user
	}
	if missing > 0 {
		j := t.Jobs[first]
		return fmt.Errorf("%s: %d of %d jobs have no row in %s (the first: job %s at line %d); give the raw file that %s was made from, keyed by %s",
			t.label(), missing, len(t.Jobs), name, j.ID, j.Line, t.label(), keyName)
	}
	for i := range t.Jobs {
		t.Jobs[i].User = users[i]
	}
	t.UsersMadeUp = false
	return nil
}
