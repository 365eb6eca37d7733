// Command apiload loads gssh serve's HTTP API as bench/api-submit.sh
// runs it: -submitters goroutines submit jobs back to back for
// -duration, while -clients clients each list the first page of jobs
// once a second and follow one job's log. It prints one Markdown table
// row: submits, submits/s, errors, latency quantiles, whether every id
// is unique, how many submitted jobs the listing then lacks, and the
// lists' and streams' errors; it exits 1 when any request failed, an id
// came twice or a job is not listed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8765", "the API's base URL")
	tokenFile := flag.String("token-file", "", "a file holding the token")
	submitters := flag.Int("submitters", 32, "goroutines submitting back to back")
	clients := flag.Int("clients", 100, "clients listing a page a second and following a log")
	duration := flag.Duration("duration", 60*time.Second, "how long to submit")
	body := flag.String("job", `{"command": ["true"], "gpus": 4}`, "the submitted job (JSON)")
	follow := flag.Int("follow", 0, "the job whose log the clients follow (0: none)")
	async := flag.Bool("async", true, `submit with "async": answered once stored, not after the pass`)
	flag.Parse()
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiload:", err)
		os.Exit(2)
	}
	auth := "Bearer " + strings.TrimSpace(string(tok))
	want := 201
	if *async {
		*body = strings.TrimSuffix(strings.TrimSpace(*body), "}") + `, "async": true}`
		want = 202
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *submitters + 2**clients, MaxConnsPerHost: 0}
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	do := func(ctx context.Context, method, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, *base+path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return hc.Do(req)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var (
		mu        sync.Mutex
		ids       []int
		latencies []time.Duration
		subErrs   atomic.Int64
		listN     atomic.Int64
		listErrs  atomic.Int64
		streamErr atomic.Int64
		firstErr  atomic.Value
	)
	fail := func(c *atomic.Int64, err error) {
		c.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	var wg sync.WaitGroup
	start := time.Now()
	for range *submitters {
		wg.Go(func() {
			for ctx.Err() == nil {
				t := time.Now()
				resp, err := do(context.Background(), "POST", "/v1/jobs", *body) // a submit begun is answered
				if err != nil {
					fail(&subErrs, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var doc struct{ ID int }
				if resp.StatusCode != want || json.Unmarshal(b, &doc) != nil || doc.ID == 0 {
					fail(&subErrs, fmt.Errorf("submit: %d %s", resp.StatusCode, bytes.TrimSpace(b)))
					continue
				}
				mu.Lock()
				ids = append(ids, doc.ID)
				latencies = append(latencies, time.Since(t))
				mu.Unlock()
			}
		})
	}
	for i := range *clients {
		wg.Go(func() { // a page a second
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			time.Sleep(time.Duration(i) * time.Second / time.Duration(*clients)) // spread over the second
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				resp, err := do(ctx, "GET", "/v1/jobs?limit=100", "")
				if err != nil {
					if ctx.Err() == nil {
						fail(&listErrs, err)
					}
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var page struct{ Jobs []json.RawMessage }
				if resp.StatusCode != 200 || json.Unmarshal(b, &page) != nil || len(page.Jobs) > 100 {
					fail(&listErrs, fmt.Errorf("list: %d %.200s", resp.StatusCode, b))
					continue
				}
				listN.Add(1)
			}
		})
		if *follow > 0 {
			wg.Go(func() { // one log followed
				resp, err := do(ctx, "GET", fmt.Sprintf("/v1/jobs/%d/log?follow=true", *follow), "")
				if err != nil {
					if ctx.Err() == nil {
						fail(&streamErr, err)
					}
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(resp.Body)
					fail(&streamErr, fmt.Errorf("log: %d %.200s", resp.StatusCode, b))
					return
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
				}
				if err := sc.Err(); err != nil && ctx.Err() == nil {
					fail(&streamErr, err)
				}
			})
		}
	}
	wg.Wait()
	took := time.Since(start)
	slices.Sort(latencies)
	q := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Round(time.Millisecond)
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	unique := len(slices.Compact(slices.Clone(sorted))) == len(ids)
	// No job lost: every id answered is listed (paging through the
	// queued jobs, oldest first).
	listed := map[int]bool{}
	for after := 0; ; {
		resp, err := do(context.Background(), "GET", fmt.Sprintf("/v1/jobs?limit=10000&after=%d", after), "")
		if err != nil {
			fail(&listErrs, err)
			break
		}
		var page struct {
			Jobs []struct{ ID int }
			Next int
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			fail(&listErrs, err)
			break
		}
		for _, j := range page.Jobs {
			listed[j.ID] = true
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	lost := 0
	for _, id := range ids {
		if !listed[id] {
			lost++
		}
	}
	fmt.Printf("| %d | %d | %.0f/s | %d | %v | %v | %v | %v | %d | %d (%d errors) | %d errors |\n",
		*submitters, len(ids), float64(len(ids))/took.Seconds(), subErrs.Load(), q(0.5), q(0.99), q(1), unique, lost,
		listN.Load(), listErrs.Load(), streamErr.Load())
	if e, _ := firstErr.Load().(string); e != "" {
		fmt.Fprintln(os.Stderr, "apiload: first error:", e)
	}
	if subErrs.Load()+listErrs.Load()+streamErr.Load() > 0 || !unique || lost > 0 {
		os.Exit(1)
	}
}
