// Package metrics is gssh serve's Prometheus metrics
// (github.com/prometheus/client_golang), in the gssh_ namespace with
// Prometheus' unit conventions (_bytes, _seconds, _ratio, _celsius,
// _total), GPUs labelled as dcgm-exporter labels them (host, gpu, UUID,
// modelName). What the queue and the GPUs are is read at each scrape
// from the daemon's service (its GPU streams' latest snapshots, the
// state); what happens between scrapes (passes, probes, API requests)
// is counted as it happens.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/service"
)

// Metrics are one gssh serve's metrics.
type Metrics struct {
	reg           *prometheus.Registry
	passes        prometheus.Histogram
	passFailures  prometheus.Counter
	probes        *prometheus.HistogramVec
	probeFailures *prometheus.CounterVec
	requests      *prometheus.CounterVec
	requestTimes  *prometheus.HistogramVec
	notifications *prometheus.CounterVec
}

// New makes the metrics of the service current returns (gssh serve's;
// a new one after SIGHUP), with Go's and the process's own.
func New(current func() *service.Local) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		passes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "gssh", Name: "pass_duration_seconds",
			Help: "Scheduling passes gssh serve ran, by how long each took.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		passFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gssh", Name: "pass_failures_total",
			Help: "Scheduling passes that could not run (the state unreadable, the inventory broken)."}),
		probes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "gssh", Name: "probe_duration_seconds",
			Help: "GPU probes of each host, by how long each took, connection included.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}, []string{"host"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gssh", Name: "probe_failures_total",
			Help: "GPU probes of each host that could not read its GPUs (unreachable, timed out, no driver)."}, []string{"host"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gssh", Name: "http_requests_total",
			Help: "HTTP API requests answered, by route and status code."}, []string{"route", "code"}),
		requestTimes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "gssh", Name: "http_request_duration_seconds",
			Help: "HTTP API requests, by route and how long each took.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gssh", Name: "notifications_total",
			Help: "Notifications by channel (webhook, email) and result: sent, retried (an attempt failed), dropped (given up, or the queue was full)."}, []string{"channel", "result"}),
	}
	m.reg.MustRegister(m.passes, m.passFailures, m.probes, m.probeFailures, m.requests, m.requestTimes, m.notifications,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{current: current})
	return m
}

// Handler serves the metrics in Prometheus' text format (or what the
// scraper asks for).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the metrics' registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Pass counts one scheduling pass that took took; failed: it could not
// run.
func (m *Metrics) Pass(took time.Duration, failed bool) {
	if failed {
		m.passFailures.Inc()
		return
	}
	m.passes.Observe(took.Seconds())
}

// Probe counts one probe of a host (fleet.Options.Probed).
func (m *Metrics) Probe(r fleet.Report) {
	m.probes.WithLabelValues(r.Host.Name).Observe(r.Took.Seconds())
	if !r.Probed() {
		m.probeFailures.WithLabelValues(r.Host.Name).Inc()
	}
}

// Request counts one HTTP API request (httpapi.Options.Observe).
func (m *Metrics) Request(route string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.requestTimes.WithLabelValues(route).Observe(took.Seconds())
}

// Notification counts one notification's outcome (notify.Options.Observe).
func (m *Metrics) Notification(channel, result string) {
	m.notifications.WithLabelValues(channel, result).Inc()
}

// scrapeTimeout bounds what a scrape reads of the service.
const scrapeTimeout = 10 * time.Second

// stateCollector reads, at each scrape, the GPUs (from the streams'
// snapshots, at most 30 s old, else a probe), the jobs and the
// fair-share standing.
type stateCollector struct{ current func() *service.Local }

var (
	gpuLabels = []string{"host", "gpu", "UUID", "modelName"}

	descMemUsed  = prometheus.NewDesc("gssh_gpu_memory_used_bytes", "GPU memory in use, as the driver reports it (nvidia-smi memory.used).", gpuLabels, nil)
	descMemTotal = prometheus.NewDesc("gssh_gpu_memory_total_bytes", "GPU memory, all of it (memory.total).", gpuLabels, nil)
	descBooked   = prometheus.NewDesc("gssh_gpu_booked_memory_bytes", "GPU memory booked by gssh jobs placed on the GPU (their --mem; a whole GPU's job books all of it).", gpuLabels, nil)
	descUtil     = prometheus.NewDesc("gssh_gpu_utilization_ratio", "GPU utilisation over the driver's last sample period, 0 to 1 (utilization.gpu / 100).", gpuLabels, nil)
	descTemp     = prometheus.NewDesc("gssh_gpu_temperature_celsius", "GPU core temperature (temperature.gpu).", gpuLabels, nil)
	descHealthy  = prometheus.NewDesc("gssh_gpu_healthy", "1 when the GPU answers and reads healthy, 0 when lost or unhealthy (an Xid, a retired-pages limit).", gpuLabels, nil)
	descHostUp   = prometheus.NewDesc("gssh_host_up", "1 when the host's GPUs could be read at the last probe or stream frame, 0 when not.", []string{"host"}, nil)
	descJobs     = prometheus.NewDesc("gssh_jobs", "Jobs in the queue that have not ended, by state and user.", []string{"state", "user"}, nil)
	descWait     = prometheus.NewDesc("gssh_job_queue_wait_seconds", "Jobs the state records as started, by how long each waited from its submit to its start.", nil, nil)
	descUsage    = prometheus.NewDesc("gssh_user_usage_gpu_hours", "Each user's decayed GPU-hours, as fair-share counts them.", []string{"user"}, nil)
	descShare    = prometheus.NewDesc("gssh_user_share_ratio", "Each user's share of the lab's GPUs by weight (weight / sum of weights), 0 to 1.", []string{"user"}, nil)
	descScore    = prometheus.NewDesc("gssh_user_fairshare_score", "Each user's fair-share score (decayed usage over share; the lowest goes first).", []string{"user"}, nil)
	descUp       = prometheus.NewDesc("gssh_scrape_errors", "Parts of this scrape that could not be read (gpus, jobs, usage): 1 each.", []string{"part"}, nil)
)

// waitBuckets are the queue wait histogram's bounds, in seconds: 1 s to
// about 3 days.
var waitBuckets = prometheus.ExponentialBuckets(1, 4, 10)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemUsed, descMemTotal, descBooked, descUtil, descTemp, descHealthy, descHostUp, descJobs, descWait, descUsage, descShare, descScore, descUp} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	l := c.current()
	failed := func(part string) { ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, part) }

	doc, err := l.CachedGPUs(ctx, service.HostQuery{MaxAge: 30 * time.Second})
	var pe *service.PartialError
	if err != nil && !errors.As(err, &pe) {
		failed("gpus")
	}
	for _, h := range doc.Hosts {
		up := 0.0
		if h.State == "ok" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descHostUp, prometheus.GaugeValue, up, h.Host)
		booked := map[int]uint64{}
		for _, j := range h.Jobs {
			booked[j.Index] += j.BookedBytes
		}
		for _, g := range h.GPUs {
			lv := []string{h.Host, strconv.Itoa(g.Index), g.UUID, g.Name}
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
			}
			if g.MemUsed != nil {
				gauge(descMemUsed, float64(*g.MemUsed))
			}
			if g.MemTotal != nil {
				gauge(descMemTotal, float64(*g.MemTotal))
			}
			gauge(descBooked, float64(booked[g.Index]))
			if g.UtilPct != nil {
				gauge(descUtil, float64(*g.UtilPct)/100)
			}
			if g.TempC != nil {
				gauge(descTemp, float64(*g.TempC))
			}
			healthy := 0.0
			if g.Health == "ok" {
				healthy = 1
			}
			gauge(descHealthy, healthy)
		}
	}

	all, err := l.Jobs(ctx, service.JobQuery{All: true})
	if err != nil && len(all.Jobs) == 0 {
		failed("jobs")
	}
	type key struct{ state, user string }
	counts := map[key]int{}
	waits := map[float64]uint64{}
	var n uint64
	var sum float64
	for _, j := range all.Jobs {
		if !j.State.Terminal() {
			counts[key{string(j.State), j.User}]++
		}
		if !j.StartedAt.IsZero() && !j.SubmittedAt.IsZero() {
			w := j.StartedAt.Sub(j.SubmittedAt).Seconds()
			n++
			sum += w
			for _, b := range waitBuckets {
				if w <= b {
					waits[b]++
				}
			}
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(v), k.state, k.user)
	}
	ch <- prometheus.MustNewConstHistogram(descWait, n, sum, waits)

	u, err := l.Usage(ctx)
	if err != nil {
		failed("usage")
	}
	total := 0.0
	for _, uu := range u.Users {
		total += uu.Weight
	}
	for _, uu := range u.Users {
		ch <- prometheus.MustNewConstMetric(descUsage, prometheus.GaugeValue, uu.Decayed, uu.User)
		ch <- prometheus.MustNewConstMetric(descScore, prometheus.GaugeValue, uu.Score, uu.User)
		if total > 0 {
			ch <- prometheus.MustNewConstMetric(descShare, prometheus.GaugeValue, uu.Weight/total, uu.User)
		}
	}
}
