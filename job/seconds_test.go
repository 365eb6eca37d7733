package job

import (
	"encoding/json"
	"testing"
	"time"
)

// SecondsTo prints as the decimal it rounds to.
func TestSecondsTo(t *testing.T) {
	for _, c := range []struct {
		d, unit time.Duration
		want    string
	}{
		{1234567891 * time.Nanosecond, time.Millisecond, "1.235"},
		{210300 * time.Microsecond, time.Microsecond, "0.2103"},
		{1500 * time.Nanosecond, time.Microsecond, "0.000002"},
		{90 * time.Minute, time.Millisecond, "5400"},
	} {
		if b, _ := json.Marshal(SecondsTo(c.d, c.unit)); string(b) != c.want {
			t.Errorf("SecondsTo(%s, %s) = %s, want %s", c.d, c.unit, b, c.want)
		}
	}
}
