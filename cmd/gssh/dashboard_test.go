package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gssh/gssh/fakelab"
	"github.com/gssh/gssh/testenv"
)

// TestDashboard opens gssh serve's dashboard in a real browser (Debian's
// chromium, headless, driven over CDP by chromedp): logged in by a link,
// it shows the lab's GPUs, a running job's memory on its GPU, a job that
// waits with its reason, and the plots; a job cancelled from the page is
// cancelled. Its screenshot is kept (t.ArtifactDir; go test -artifacts
// keeps it under the package's output). A wrong token gets the login
// page and no data; the page without a session redirects to the login.
func TestDashboard(t *testing.T) {
	t.Parallel()
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		testenv.Need(t, "no chromium on PATH (apt-get install chromium)")
	}
	bin := filepath.Join(buildGssh(t), "gssh")
	dir := t.TempDir()
	lab, err := fakelab.Start(fakelab.Options{Dir: filepath.Join(dir, "lab"), Shim: bin, Hosts: []fakelab.HostSpec{
		{Name: "gpu1", GPUs: []fakelab.GPUSpec{fakelab.A100, fakelab.A100}},
		{Name: "gpu2", GPUs: []fakelab.GPUSpec{fakelab.RTX4090}, Foreign: []fakelab.Foreign{{GPU: 0, Name: "jupyter-lab", Mem: 2 << 30}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	env := append(os.Environ(), "HOME="+home, "GSSH_INVENTORY="+lab.Inventory, "GSSH_STATE="+filepath.Join(dir, "state", "state.db"),
		"GSSH_HELPER="+bin, "GSSH_SERVER=", "GSSH_TOKEN=", testInventoryEnv+"="+filepath.Join(dir, "none.yaml"))
	os.MkdirAll(filepath.Join(dir, "state"), 0o700)
	gssh := gsshRunner(t, bin, env, dir)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	out := outputFile(t, "serve.out")
	var srv *exec.Cmd
	serve := func() {
		srv = exec.Command(bin, "serve", "--interval", "500ms", "--listen", "127.0.0.1:"+strconv.Itoa(port))
		srv.Env = env
		srv.Stdout, srv.Stderr = out.File, out.File
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	serve()
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	var base string
	for end := time.Now().Add(20 * time.Second); base == ""; time.Sleep(50 * time.Millisecond) {
		if m := regexp.MustCompile(`the dashboard at (http://\S+)/`).FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		} else if time.Now().After(end) {
			t.Fatalf("gssh serve did not say where its dashboard is:\n%s", out.String())
		}
	}
	if o := gssh("submit", "--host", "gpu1", "--mem", "8G", "--name", "keep", "--", "sleep", "120"); !strings.Contains(o, "job 1 running on ") {
		t.Fatalf("submit: %s", o)
	}
	if o := gssh("submit", "--host", "gpu1", "--gpus", "2", "--name", "big", "--", "true"); !strings.Contains(o, "job 2 queued: ") {
		t.Fatalf("submit: %s", o)
	}
	tok := strings.TrimSpace(strings.SplitN(gssh("token", "create", "--name", "browser"), "\n", 2)[0])

	// Without a browser first: no session, no page; a wrong token, the
	// login page again and nothing of the queue.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Get(base + "/"); err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("/ without a session: %v %v", resp, err)
	}
	if resp, err := http.Get(base + "/login?token=gssh_00000000_wrong"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "That token is not valid") || strings.Contains(string(b), "gpu1") {
			t.Errorf("a wrong token: %d\n%s", resp.StatusCode, b)
		}
	}
	if resp, err := http.Post(base+"/v1/jobs", "application/json", strings.NewReader(`{"command": ["true"]}`)); err == nil && resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a submit without a token: %d", resp.StatusCode)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1300))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute) // a loaded machine: chromium starts slowly
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login?token="+tok),
		chromedp.WaitVisible(`#gpus tbody tr[data-host="gpu2"]`),
		chromedp.WaitVisible(`#jobs tbody tr[data-job="2"]`),
		chromedp.WaitVisible(`#plot-gpus svg`),
	); err != nil {
		t.Fatalf("the dashboard: %v\ngssh serve said:\n%s", err, out.String())
	}
	// The page redraws its tables every 3 s: a node read as it is
	// replaced is read again.
	text := func(sel string) string {
		t.Helper()
		var err error
		for range 10 {
			var s string
			if s, err = chromedp.Run(ctx, chromedp.Text(sel)); err == nil {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: %v", sel, err)
		return ""
	}
	// jsClick clicks what sel names in the page as it is now (a row the
	// page redraws is never a stale node), if it is there.
	jsClick := func(sel string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`document.querySelector(`+strconv.Quote(sel)+`)?.click()`)); err != nil {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
	// The page reads the API every 3 s: what a probe had not seen yet
	// comes with a later read.
	shows := func(sel string, wants ...string) {
		t.Helper()
		var got string
		for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			got = text(sel)
			missing := false
			for _, w := range wants {
				missing = missing || !strings.Contains(got, w)
			}
			if !missing {
				return
			}
		}
		t.Errorf("%s lacks some of %q:\n%s", sel, wants, got)
	}
	shows(`#gpus`, "gpu1", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "job 1 ", "8.0 GiB / 80.0 GiB", "jupyter-lab")
	shows(`#jobs`, "keep: sleep 120", "big: true", "queued", "2 needed", "#1; reserved gpu1:0,1 from ", "8.0 GiB / 8.0 GiB")
	who := text(`.who`)
	if !strings.Contains(who, sshdUser(t)) {
		t.Errorf("logged in as %q", who)
	}
	// Job 1's detail: its memory over time (gssh serve samples it every
	// 5 --intervals here), and its log.
	// A click may land on a row the page has just redrawn (the old node,
	// no longer in the page): click until the detail shows.
	for i := 0; ; i++ {
		jsClick(`#jobs tbody tr[data-job="1"] a`)
		if shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("#detail").hidden`)); err == nil && shown {
			break
		} else if i == 30 {
			t.Fatalf("job 1's detail does not show: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	shows(`#detail-mem`, "max 8.0 GiB")                          // the detail is read again at each refresh
	shows(`#gpus`, "job 1 ")                                     // the screenshot with it
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", png)

	// "Cancel job 1?": yes (the page asks with window.confirm). Clicked
	// again while not cancelled: a click may land on a redrawn row.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.confirm = () => true`)); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(60 * time.Second); ; {
		jsClick(`button.cancel[data-job="1"]`)
		time.Sleep(time.Second)
		if o := gssh("show", "1"); regexp.MustCompile(`(?m)^state: +cancelled$`).MatchString(o) {
			break
		} else if time.Now().After(end) {
			t.Fatalf("job 1 was not cancelled from the page:\n%s", o)
		}
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(`#jobs tbody tr[data-job="1"]`)); err != nil {
		t.Errorf("the cancelled job stays on the page: %v", err)
	}

	// gssh serve restarts: the page says it cannot reach it, then goes on.
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	waitText := func(want string) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if s := text(`#status`); strings.Contains(s, want) {
				return
			} else if time.Now().After(end) {
				t.Fatalf("the page's status is %q, not %q", s, want)
			}
		}
	}
	waitText("cannot reach gssh serve")
	serve()
	waitText("updated ")
	if got := text(`#gpus`); !strings.Contains(got, "gpu1") {
		t.Errorf("after the restart, the GPU table:\n%s", got)
	}
}
