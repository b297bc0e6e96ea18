//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// browser is a headless Chromium (Debian's) driven by chromedp, with its screenshots' folder.
type browser struct {
	t         testing.TB
	ctx       context.Context
	artifacts string
	// said is what the pages threw and wrote to their consoles, for a failure's log.
	mu   sync.Mutex
	said []string
}

// chromiumPath is Debian's Chromium, which scripts/setup.sh installs.
const chromiumPath = "/usr/bin/chromium"

func newBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s not found: scripts/setup.sh installs Debian's chromium", chromiumPath)
	}
	dir := os.Getenv("HALE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("artifacts", "console")
	} else {
		dir = filepath.Join(dir, "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Chromium makes temporary directories of its own (/tmp/org.chromium.Chromium.*, for its
	// singleton socket) and leaves them when it is ended: TMPDIR puts them in the test's.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()), chromedp.Env("TMPDIR="+t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, artifacts: dir}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	t.Cleanup(func() { cancel(); cancelA() }) // ends Chromium and its children
	if err := chromedp.Do(ctx); err != nil {  // starts Chromium, which lives as long as ctx
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

// listen keeps what the pages throw and write to their consoles (chromedp.WithListener: it
// runs on the tab's reading goroutine, so it only appends).
func (b *browser) listen(ev any) {
	line := ""
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		line = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			line += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		line = "console." + string(ev.Type) + ":"
		for _, a := range ev.Args {
			line += " " + string(a.Value) + a.Description
		}
	default:
		return
	}
	b.mu.Lock()
	b.said = append(b.said, time.Now().Format("15:04:05.000 ")+line)
	b.mu.Unlock()
}

// diagnose logs what the page is at and loaded (its scripts, by resource timing: one missing
// is still loading) and what it threw or logged: a failure's cause beyond its screenshot.
func (b *browser) diagnose() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({url: location.href, readyState: document.readyState,
		loaded: performance.getEntriesByType("resource").map((e) => e.name.replace(location.origin, "") + " " + Math.round(e.duration) + "ms " + e.responseStatus)})`))
	if err != nil {
		state = "page state unreadable: " + err.Error()
	}
	b.mu.Lock()
	said := strings.Join(b.said, "\n")
	b.mu.Unlock()
	b.t.Logf("page: %s\nwhat the pages threw or logged:\n%s", state, said)
}

// run runs chromedp actions with a limit of two minutes each call: the limit only bounds a
// failure; a parallel run on two busy CPUs gave a first page load more than one.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.diagnose()
		b.t.Fatalf("%s: %v", what, err)
	}
}

// shot writes a PNG of the whole page as name.png in the artifacts folder.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	time.Sleep(300 * time.Millisecond) // the last poll's answer drawn
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Error(err)
	}
	b.t.Logf("screenshot %s", path)
}

// viewShot writes a PNG of what the window shows (the top of a long page) as name.png.
func (b *browser) viewShot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(b.artifacts, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

// text is the text content of the first element matching a CSS selector ("" when none).
func (b *browser) text(sel string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
	return s
}

// waitFor polls a JavaScript expression until it is true, in the page as it updates itself.
// On failure it saves a screenshot and says what the page showed (show, a JS expression).
func (b *browser) waitFor(within time.Duration, what, cond, show string) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		seen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](show))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("waited %s for %s; the page shows: %s (%v)", within, what, seen, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// noReload checks the page was never reloaded since marked: everything came by polling.
func (b *browser) noReload() {
	b.t.Helper()
	if !b.eval(`window.__haleMark === 1`) {
		b.t.Fatal("the page was reloaded (its mark is gone): the console must update itself")
	}
}

// eval evaluates a JavaScript expression in the page and reports whether it is true.
func (b *browser) eval(expr string) bool {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return ok
}

func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// jsNodes is a JavaScript expression: the nodes table's rows as [{id, logical, status, health, repair}].
const jsNodes = `[...document.querySelectorAll('#nodes tr[data-node]')].map(r => ({id: r.dataset.node, logical: r.dataset.logical,
  status: r.querySelector('td.status .badge').textContent, health: r.querySelector('td.health .badge').textContent,
  repair: r.querySelector('td.repair').textContent, name: (r.querySelector('td.node .logical') || {}).textContent,
  note: (r.querySelector('td.health .note') || {}).textContent || ''}))`

// TestConsoleInBrowser drives the web console in headless Chromium: sign in through the URL
// hale console prints; the create form refuses an invalid document with the API's own message,
// then creates a cluster that comes up (InService, nodes Running) without a reload; an Xid 79
// injected with hale debug inject-fault turns the node unhealthy and back; the repair's
// timeline, the events (filtered) and a lifecycle log stream show; a group is scaled through the
// confirmation dialog and the new node appears, and rebooted through the node table; a key without sagemaker:UpdateCluster, signed
// in with the form, sees the API's AccessDenied message. Screenshots of every page go to
// $HALE_ARTIFACTS/console (default test/e2e/artifacts/console).
func TestConsoleInBrowser(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	ctx := context.Background()
	const name = "web"
	t.Cleanup(func() {
		if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)}); err == nil {
			e.waitGone(name, 90*time.Second)
		}
	})
	// A key that may look but not change: no sagemaker:UpdateCluster.
	viewer, err := auth.NewAccessKey("viewer", []string{"sagemaker:Describe*", "sagemaker:List*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.App.Store.Write(ctx, func(tx store.Tx) error { return tx.InsertAccessKey(viewer) }); err != nil {
		t.Fatal(err)
	}

	out, err := e.hale("console").CombinedOutput()
	if err != nil {
		t.Fatalf("hale console: %v\n%s", err, out)
	}
	signin := ""
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "http") {
			signin = f
		}
	}
	if !strings.Contains(signin, "/console/signin?token=") {
		t.Fatalf("hale console printed no sign-in URL:\n%s", out)
	}
	b := newBrowser(t)
	b.run("sign in with hale console's URL", chromedp.Navigate(signin), visible("#view h1"))
	b.eval(`(window.__haleMark = 1) === 1`)
	if p := b.text("#principal"); p != "admin" {
		t.Fatalf("signed in as %q, want admin", p)
	}
	// The URL was good once: used again without this browser's session cookie it gets the
	// sign-in page and its message (401); with the cookie (reopened from history) it redirects
	// to the console on the session the browser has.
	ctxAgain, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	again, err := chromedp.Run(ctxAgain, chromedp.Evaluate[string](fmt.Sprintf(`Promise.all([fetch(%[1]q, {redirect: "manual", credentials: "omit"}), fetch(%[1]q, {redirect: "manual"})]).then(([a, b]) => a.status + " " + b.type)`, signin), chromedp.EvalAwaitPromise))
	cancel()
	if err != nil || again != "401 opaqueredirect" {
		t.Errorf("the sign-in URL used a second time answers %q (%v), want 401 without the session cookie and a redirect with it", again, err)
	}

	// Create the cluster through the form: first a document the API refuses, then a good one.
	lc := e.script("console", "on_create.sh", recordScript)
	bad := `{"ClusterName": "web", "InstanceGroups": []}`
	c, err := client.New(ctx, client.Options{Profile: "hale", EndpointURL: e.endpoint(), DataDir: e.Options.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	_, apiErr := c.Call(ctx, "CreateCluster", []byte(bad))
	if apiErr == nil {
		t.Fatal("the API accepted an empty InstanceGroups")
	}
	b.run("open the create form", click("#create-link"), visible("#create-doc"),
		setValue("#create-doc", bad), click("#create-submit"),
		visible("#confirm-ok"), click("#confirm-ok"),
		visible("#create-error"))
	want := api.AsError(apiErr)
	if got := b.text("#create-error"); got != want.Code+want.Message {
		t.Errorf("the form says %q; the API says %s: %s", got, want.Code, want.Message)
	}
	b.shot("create-cluster-form")
	doc, _ := json.MarshalIndent(map[string]any{"ClusterName": name, "InstanceGroups": []any{
		consoleGroup("controller", "ml.c5.xlarge", 1, "Controller", lc),
		consoleGroup("gpu", "ml.g5.2xlarge", 1, "Compute", lc, "gpu"),
	}}, "", "  ")
	b.run("create the cluster", setValue("#create-doc", string(doc)), click("#create-submit"),
		visible("#confirm-ok"), click("#confirm-ok"),
		visible("#nodes"))
	b.waitFor(150*time.Second, "the cluster InService with 2 Running nodes",
		`document.querySelector('#cluster-status').textContent === 'InService' && (n => n.length === 2 && n.every(x => x.status === 'Running' && x.health === 'Healthy'))(`+jsNodes+`)`,
		`document.querySelector('#cluster-status').textContent + ' ' + JSON.stringify(`+jsNodes+`)`)
	b.noReload()
	b.shot("cluster-nodes")
	b.run("back to the clusters", click(".crumbs a"), visible(`#clusters tr[data-cluster="web"]`))
	b.waitFor(10*time.Second, "the clusters list shows web InService", `document.querySelector('#clusters tr[data-cluster="web"] td.status').textContent.startsWith('InService')`,
		`document.querySelector('#clusters').textContent`)
	b.shot("clusters")

	// A fault: Xid 79 on the GPU node. The page shows it unhealthy, then healthy again.
	b.run("open the cluster", click(`#clusters tr[data-cluster="web"] a`), visible("#nodes tr[data-node]"))
	var gpu struct{ ID, Logical string }
	for _, n := range e.storeNodes(name) {
		if n.GroupName == "gpu" {
			gpu.ID, gpu.Logical = n.InstanceID, n.LogicalID
		}
	}
	if out, err := e.hale("debug", "inject-fault", "--cluster-name", name, "--node-id", gpu.ID, "--xid", "79", "--no-wait").CombinedOutput(); err != nil {
		t.Fatalf("hale debug inject-fault: %v\n%s", err, out)
	}
	row := fmt.Sprintf(`(%s).find(x => x.logical === %q)`, jsNodes, gpu.Logical)
	// Its health line names the GPU that fell off the bus (the finding's), not the inventory the
	// agent sent at its start; the Node cell leads with the logical id the CLI uses.
	b.waitFor(90*time.Second, "the GPU node unhealthy, GPU 0 faulted", `(r => r && r.health !== 'Healthy' && r.repair !== '' && r.note === 'GPU 0 faulted (Xid 79)' && r.name === `+
		fmt.Sprintf("%q", gpu.Logical)+`)(`+row+`)`, `JSON.stringify(`+row+`)`)
	b.shot("node-unhealthy")
	b.waitFor(150*time.Second, "the GPU node back in service", `(r => r && r.health === 'Healthy' && r.status === 'Running' && r.repair === '')(`+row+`)`, `JSON.stringify(`+row+`)`)
	b.noReload()

	// The repair's timeline.
	b.run("open the repairs", click("#tab-repairs"), visible("#repairs tr[data-repair] a"))
	b.waitFor(30*time.Second, "the repair Done", `document.querySelector('#repairs tr[data-repair]').textContent.includes('Done')`, `document.querySelector('#repairs').textContent`)
	b.shot("repairs")
	b.run("open the repair", click("#repairs tr[data-repair] a"), visible("#timeline li"))
	timeline := b.text("#timeline")
	for _, step := range []string{"drain", "replac"} {
		if !strings.Contains(strings.ToLower(timeline), step) {
			t.Errorf("the timeline has no %q step: %s", step, timeline)
		}
	}
	b.shot("repair-timeline")

	// Events, filtered to instances.
	b.run("open the events", click("#tab-events"), visible("#events tr[data-event]"))
	b.eval(`(document.querySelector('#f-type').value = 'Instance') === 'Instance'`)
	b.waitFor(10*time.Second, "only instance events", `[...document.querySelectorAll('#events tr[data-event] td:nth-child(3)')].every(td => td.textContent.startsWith('Instance'))`,
		`document.querySelector('#events').textContent`)
	b.eval(`(document.querySelector('#f-type').value = '') === ''`)
	b.waitFor(10*time.Second, "the console's CreateCluster in the events", `document.querySelector('#events').textContent.includes('Web console: admin')`,
		`document.querySelector('#events').textContent`)
	b.shot("events")

	// A lifecycle log stream of the GPU node.
	b.run("open the logs", click("#tab-logs"), visible(`#streams tr[data-stream^="LifecycleConfig/gpu/"] a`),
		click(`#streams tr[data-stream^="LifecycleConfig/gpu/"] a`))
	b.waitFor(20*time.Second, "the stream's lines", `document.querySelector('#log').textContent.includes('on_create ran on')`, `document.querySelector('#log').textContent`)
	// Followed live: a line written to the stream now (as its agent would) shows without a reload.
	stream := b.text("h2.mono")
	if err := e.App.Store.Write(ctx, func(tx store.Tx) error {
		c, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		return tx.AppendLogEvents(agentserver.LogGroup(c.Name, c.ID), stream, c.ID,
			[]store.LogEvent{{Time: time.Now(), Message: "a line written while the console follows the stream"}})
	}); err != nil {
		t.Fatal(err)
	}
	b.waitFor(20*time.Second, "the new line", `document.querySelector('#log').textContent.includes('a line written while the console follows')`,
		`document.querySelector('#log').textContent`)
	b.noReload()
	b.shot("log-stream")

	// Scale the GPU group to 2 through the confirmation dialog; the new node shows up Running.
	b.run("scale the gpu group", click("#tab-nodes"), visible(`button.scale[data-group="gpu"]`),
		click(`button.scale[data-group="gpu"]`), visible("#confirm-count"),
		setValue("#confirm-count", "2"))
	b.shot("scale-confirmation")
	b.run("confirm", click("#confirm-ok"), visible("#action-ok"))
	b.waitFor(150*time.Second, "3 Running nodes", `(n => n.length === 3 && n.every(x => x.status === 'Running'))(`+jsNodes+`)`, `JSON.stringify(`+jsNodes+`)`)
	b.noReload()
	if ev := e.events(name); !strings.Contains(ev, "Web console: admin (access key ") || !strings.Contains(ev, "UpdateCluster: instance group gpu to 2 instance(s)") {
		t.Errorf("no event of the console's UpdateCluster:\n%s", ev)
	}
	b.shot("cluster-scaled")

	// Reboot the new node: tick it, Reboot, confirm; it comes back Running and Healthy.
	var added, addedLogical, bootBefore string
	for _, n := range e.storeNodes(name) {
		if n.GroupName == "gpu" && n.LogicalID != gpu.Logical {
			added, addedLogical, bootBefore = n.InstanceID, n.LogicalID, n.Details.BootID
		}
	}
	b.run("reboot a node", click(fmt.Sprintf(`#nodes tr[data-node=%q] input[type=checkbox]`, added)), click("#reboot-nodes"),
		visible("#confirm-ok"), click("#confirm-ok"))
	b.waitFor(20*time.Second, "the reboot accepted", fmt.Sprintf(`(document.querySelector('#action-ok') || {textContent: ''}).textContent === %q`,
		"Reboot "+added+" (BatchRebootClusterNodes accepted)"), `document.querySelector('#flash').textContent`)
	eventually(t, 120*time.Second, "the node rebooted (a new boot id)", func() (bool, string) {
		n := e.nodeOf(name, addedLogical)
		if n == nil {
			return false, "no node " + addedLogical
		}
		return n.Details.BootID != bootBefore, fmt.Sprint(n.Status, " ", n.Details.BootID)
	})
	b.waitFor(120*time.Second, "the rebooted node back", `(n => n.length === 3 && n.every(x => x.status === 'Running' && x.health === 'Healthy'))(`+jsNodes+`)`,
		`JSON.stringify(`+jsNodes+`)`)
	if ev := e.events(name); !strings.Contains(ev, "BatchRebootClusterNodes: node(s) "+added) {
		t.Errorf("no event of the console's reboot:\n%s", ev)
	}

	// A phone.
	b.run("a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.shot("phone-cluster-nodes")
	b.run("the clusters on a phone", click(".crumbs a"), visible(`#clusters tr[data-cluster="web"]`))
	b.shot("phone-clusters")
	b.run("a laptop's viewport", chromedp.EmulateViewport(1280, 860))

	// The viewer key signs in with the form; scaling is refused with the API's message.
	b.run("sign out", click("#signout"), visible("#access_key_id"))
	b.run("sign in as viewer", setValue("#access_key_id", viewer.ID), setValue("#secret_access_key", viewer.Secret),
		click("#signin-submit"), visible("#clusters"),
		chromedp.Navigate(strings.SplitN(signin, "/console/", 2)[0]+"/console/?c#/c/web"), visible(`button.scale[data-group="gpu"]`),
		click(`button.scale[data-group="gpu"]`), visible("#confirm-count"),
		setValue("#confirm-count", "3"), click("#confirm-ok"),
		visible("#action-error"))
	wantDenied := "AccessDeniedExceptionUser: viewer is not authorized to perform: sagemaker:UpdateCluster on resource: web"
	if got := b.text("#action-error"); got != wantDenied {
		t.Errorf("the refusal shows %q, want %q", got, wantDenied)
	}
	b.shot("refused-action")
	if p := b.text("#principal"); p != "viewer" {
		t.Errorf("signed in as %q, want viewer", p)
	}
}

// consoleGroup is an instance group of a CreateCluster document, as a user would paste it.
func consoleGroup(name, typ string, count int, nodeType, lc string, partitions ...string) map[string]any {
	slurm := map[string]any{"NodeType": nodeType}
	if len(partitions) > 0 {
		slurm["PartitionNames"] = partitions
	}
	return map[string]any{"InstanceGroupName": name, "InstanceType": typ, "InstanceCount": count, "ExecutionRole": role,
		"LifeCycleConfig": map[string]any{"SourceS3Uri": lc, "OnCreate": "on_create.sh"}, "SlurmConfig": slurm}
}
