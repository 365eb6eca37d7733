package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/metrics"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/service/servicetest"
)

// TestScrape: a scrape of a queue with a running job parses with
// Prometheus' own parser, with each metric of gssh's named and typed as
// documented and labelled as dcgm-exporter labels GPUs.
func TestScrape(t *testing.T) {
	svc := servicetest.Local(t, "ann")
	m := metrics.New(func() *service.Local { return svc })
	svc.ObserveProbes(m.Probe)
	ctx := context.Background()
	res, err := svc.Submit(ctx, service.SubmitRequest{Spec: job.Spec{Argv: []string{"sleep", "30"}, GPUs: 1, MemPerGPU: 8 << 30, Workdir: "~", Priority: 5, Host: "ctl"}})
	if err != nil || res.Job.State != job.Running {
		t.Fatalf("submit: %+v, %v", res.Job, err)
	}
	defer svc.Cancel(ctx, service.CancelRequest{ID: res.Job.ID})
	m.Pass(40*time.Millisecond, false)
	m.Request("GET /v1/jobs", 200, 3*time.Millisecond)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	for name, want := range map[string]dto.MetricType{
		"gssh_gpu_memory_used_bytes":         dto.MetricType_GAUGE,
		"gssh_gpu_memory_total_bytes":        dto.MetricType_GAUGE,
		"gssh_gpu_booked_memory_bytes":       dto.MetricType_GAUGE,
		"gssh_gpu_utilization_ratio":         dto.MetricType_GAUGE,
		"gssh_gpu_temperature_celsius":       dto.MetricType_GAUGE,
		"gssh_gpu_healthy":                   dto.MetricType_GAUGE,
		"gssh_host_up":                       dto.MetricType_GAUGE,
		"gssh_jobs":                          dto.MetricType_GAUGE,
		"gssh_job_queue_wait_seconds":        dto.MetricType_HISTOGRAM,
		"gssh_user_usage_gpu_hours":          dto.MetricType_GAUGE,
		"gssh_user_share_ratio":              dto.MetricType_GAUGE,
		"gssh_user_fairshare_score":          dto.MetricType_GAUGE,
		"gssh_pass_duration_seconds":         dto.MetricType_HISTOGRAM,
		"gssh_pass_failures_total":           dto.MetricType_COUNTER,
		"gssh_probe_duration_seconds":        dto.MetricType_HISTOGRAM,
		"gssh_http_requests_total":           dto.MetricType_COUNTER,
		"gssh_http_request_duration_seconds": dto.MetricType_HISTOGRAM,
	} {
		f := families[name]
		if f == nil {
			t.Errorf("%s: not in the scrape", name)
			continue
		}
		if f.GetType() != want || f.GetHelp() == "" {
			t.Errorf("%s: type %v, help %q; want %v and a help", name, f.GetType(), f.GetHelp(), want)
		}
	}
	labels := func(m *dto.Metric) map[string]string {
		out := map[string]string{}
		for _, l := range m.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	// GPU 0 of a100x4: dcgm-exporter's labels; the job's 8 GiB booked on it.
	var booked float64
	for _, g := range families["gssh_gpu_booked_memory_bytes"].GetMetric() {
		l := labels(g)
		if l["host"] != "ctl" || !strings.HasPrefix(l["UUID"], "GPU-") || !strings.Contains(l["modelName"], "A100") || l["gpu"] == "" {
			t.Errorf("GPU labels %v", l)
		}
		booked += g.GetGauge().GetValue()
	}
	if booked != 8<<30 {
		t.Errorf("booked %v bytes over the GPUs, want the job's 8 GiB", booked)
	}
	found := false
	for _, j := range families["gssh_jobs"].GetMetric() {
		if l := labels(j); l["state"] == "running" && l["user"] == "ann" && j.GetGauge().GetValue() == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("gssh_jobs: no running job of ann's: %v", families["gssh_jobs"])
	}
	if h := families["gssh_job_queue_wait_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 {
		t.Errorf("queue wait: %d jobs, want 1", h.GetSampleCount())
	}
	if c := families["gssh_probe_duration_seconds"].GetMetric(); len(c) != 1 || labels(c[0])["host"] != "ctl" || c[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("probes: %v", c)
	}
	if r := families["gssh_http_requests_total"].GetMetric(); len(r) != 1 || labels(r[0])["route"] != "GET /v1/jobs" || labels(r[0])["code"] != "200" {
		t.Errorf("requests: %v", r)
	}
}
