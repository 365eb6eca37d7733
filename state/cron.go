package state

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
)

// bucketCron holds the scheduled jobs (cron/, by id), made by the first
// one's write: no migration is needed.
const bucketCron = "cron"

// Cron is one scheduled job: gssh serve submits Spec (as User) each time
// Schedule (a cron spec: "0 2 * * *") comes round.
type Cron struct {
	ID       string    `json:"id"` // 8 hex digits, its key
	User     string    `json:"user"`
	Schedule string    `json:"schedule"`
	Spec     job.Spec  `json:"spec"`
	Array    []int     `json:"array,omitempty"` // the array's task indexes, if any
	ArrayMax int       `json:"array_limit,omitempty"`
	Hold     bool      `json:"hold,omitempty"`
	Created  time.Time `json:"created"`
	LastRun  time.Time `json:"last_run,omitzero"` // when it was last due (submitted or not)
	LastJob  job.ID    `json:"last_job,omitempty"`
	LastErr  string    `json:"last_error,omitempty"` // why the last submit failed
}

// Crons returns every scheduled job, by id. A record that cannot be
// decoded is left out, with an error wrapping ErrBadRecord.
func (s *Bolt) Crons() ([]Cron, error) {
	out, bad, err := listRecords(s, bucketCron, func(c Cron) string { return c.ID })
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: the scheduled jobs %s cannot be decoded (gssh cron remove removes them)", ErrBadRecord, strings.Join(bad, ", "))
	}
	return out, nil
}

// PutCron stores c under its id (new or replacing), in one transaction.
func (s *Bolt) PutCron(c Cron) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketCron))
		if err != nil {
			return err
		}
		return b.Put([]byte(c.ID), v)
	})
}

// RemoveCrons deletes the scheduled jobs of ids that remove says to (it
// sees each as stored; an undecodable one as its id alone), in one
// transaction, and returns those removed.
func (s *Bolt) RemoveCrons(ids []string, remove func(Cron) bool) ([]Cron, error) {
	return removeRecords(s, bucketCron, ids, func(id string) Cron { return Cron{ID: id} }, remove)
}
