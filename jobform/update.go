package jobform

import (
	"fmt"

	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

// Update is what gssh update changes, each value as its flag writes it
// (nil: left as it is); in JSON, PATCH /v1/jobs/{id}'s body.
type Update struct {
	Priority *int    `json:"priority,omitempty"`
	Timeout  *string `json:"timeout,omitempty"`
	Mem      *string `json:"mem,omitempty"`
	Name     *string `json:"name,omitempty"`
	CPUs     *string `json:"cpus,omitempty"`
	HostMem  *string `json:"host_mem,omitempty"`
	LogLimit *string `json:"log_limit,omitempty"`
	// Fields makes errors name the JSON fields, as Form's.
	Fields bool `json:"-"`
}

func (u Update) name(flag string) string { return Form{Fields: u.Fields}.name(flag) }

// Request is the update's request (its IDs the caller's to set): values
// read as gssh submit reads them; an empty size or CPU count, and an
// update that changes nothing, are refused. warn is told of a size that
// may mean GiB.
func (u Update) Request(warn func(string)) (service.UpdateRequest, error) {
	r := service.UpdateRequest{Priority: u.Priority, Name: u.Name}
	if u.Timeout != nil {
		d, err := units.ParseWalltime(*u.Timeout)
		if err != nil {
			return r, fmt.Errorf("%s: %w", u.name("timeout"), err)
		}
		r.Timeout = &d
	}
	for _, s := range []struct {
		flag, what string
		v          *string
		out        **uint64
		read       func(name, v string) (uint64, error)
	}{
		{"mem", "the GPU memory per GPU, such as 8G", u.Mem, &r.Mem, func(n, v string) (uint64, error) { return Mem(n, v, warn) }},
		{"host-mem", "the host memory to book, such as 64G", u.HostMem, &r.HostMem, func(n, v string) (uint64, error) { return Mem(n, v, warn) }},
		{"log-limit", "the log's cap, such as 1G", u.LogLimit, &r.LogLimit, LogLimit},
	} {
		if s.v == nil {
			continue
		}
		n, err := s.read(u.name(s.flag), *s.v)
		if err != nil {
			return r, err
		}
		if n == 0 {
			return r, fmt.Errorf("%s is empty: give %s", u.name(s.flag), s.what)
		}
		*s.out = &n
	}
	if u.CPUs != nil {
		n, err := CPUs(u.name("cpus"), *u.CPUs)
		if err != nil {
			return r, err
		}
		if n == 0 {
			return r, fmt.Errorf("%s is empty: give a whole number of CPUs, 1 or more", u.name("cpus"))
		}
		r.CPUs = &n
	}
	if r.Priority == nil && r.Timeout == nil && r.Mem == nil && r.Name == nil && r.CPUs == nil && r.HostMem == nil && r.LogLimit == nil {
		return r, fmt.Errorf("nothing to update: give %s, %s, %s, %s, %s, %s or %s", u.name("priority"), u.name("timeout"), u.name("mem"),
			u.name("cpus"), u.name("host-mem"), u.name("log-limit"), u.name("name"))
	}
	return r, nil
}
