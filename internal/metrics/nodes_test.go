package metrics_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/metrics"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// fleet is a store of n nodes in one cluster, each with a sample as an agent of an 8-GPU
// node with two interfaces sends it, and an Agents that hands those samples out.
type fleet struct {
	samples []agentserver.NodeSample
}

func (f *fleet) Stats() agentserver.SessionStats {
	return agentserver.SessionStats{ByVersion: map[uint32]int{agentproto.CapabilityVersion: len(f.samples)}}
}
func (f *fleet) NodeSamples() []agentserver.NodeSample { return f.samples }

// sample is an agent's sample with this many interfaces and GPUs.
func sample(nics, gpus int) *agentproto.NodeMetrics {
	m := &agentproto.NodeMetrics{SampledUnixMs: time.Now().UnixMilli(), IntervalMs: 15000, Load1: 3.5,
		MemoryTotalBytes: 2 << 40, MemoryAvailableBytes: 1 << 40, RootSizeBytes: 500 << 30, RootAvailBytes: 200 << 30}
	for _, mode := range agentproto.CPUModes {
		m.Cpu = append(m.Cpu, &agentproto.CPUMode{Mode: mode, Seconds: 1000})
	}
	for _, mp := range []string{"/", "/opt/dlami/nvme"} {
		m.Filesystems = append(m.Filesystems, &agentproto.Filesystem{Mountpoint: mp, Device: "/dev/nvme0n1p1", Fstype: "ext4",
			SizeBytes: 500 << 30, AvailBytes: 200 << 30, FreeBytes: 225 << 30})
	}
	for i := 0; i < nics; i++ {
		m.Net = append(m.Net, &agentproto.NetInterface{Device: fmt.Sprintf("ens%d", i), ReceiveBytes: 1 << 30, TransmitBytes: 1 << 29})
	}
	for i := 0; i < gpus; i++ {
		m.Gpus = append(m.Gpus, &agentproto.GPUMetrics{Index: int32(i), Uuid: fmt.Sprintf("GPU-%08x-0000-0000-0000-000000000000", i),
			Model: "NVIDIA H100 80GB HBM3", Device: fmt.Sprintf("nvidia%d", i), GpuUtil: 97, FbUsedMib: 70000, FbFreeMib: 11559,
			GpuTempC: 61, PowerUsageW: 650})
	}
	return m
}

// newFleet makes the store's nodes (a third of them in an open Replace repair, for the health
// statuses) and their samples, each sample shaped by shape(i).
func newFleet(tb testing.TB, n int, shape func(i int) *agentproto.NodeMetrics) (store.Store, *fleet) {
	tb.Helper()
	st, err := sqlite.Open(filepath.Join(tb.TempDir(), "hale.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	now := time.Now()
	f := &fleet{}
	err = st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertCluster(&store.Cluster{ID: "fleetfleetfl", Name: "fleet", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/fleetfleetfl",
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("i-%017d", i)
			node := &store.Node{ClusterID: "fleetfleetfl", InstanceID: id, LogicalID: fmt.Sprintf("workers-%d", i), GroupName: "workers",
				InstanceType: "ml.p5.48xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
			node.Details.OrchestratorName = fmt.Sprintf("ip-10-1-%d-%d", i/256, i%256)
			node.Details.PrivateDNSHostname = node.Details.OrchestratorName + ".ec2.internal"
			if err := tx.InsertNode(node); err != nil {
				return err
			}
			if i%3 == 0 {
				if err := tx.InsertRepair(&store.Repair{ID: fmt.Sprintf("r-%d", i), ClusterID: "fleetfleetfl", LogicalID: node.LogicalID,
					InstanceID: id, Action: "Replace", Fault: "gpu.bus_lost", State: store.RepairWaitingForJobs, CreatedAt: now, UpdatedAt: now}); err != nil {
					return err
				}
			}
			f.samples = append(f.samples, agentserver.NodeSample{InstanceID: id, ClusterID: "fleetfleetfl", Metrics: shape(i), Received: now,
				Capability: agentproto.CapabilityVersion})
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return st, f
}

// nodeFamilies are the metric names a node adds.
func isNodeMetric(name string) bool {
	return strings.HasPrefix(name, "node_") || strings.HasPrefix(name, "DCGM_") || strings.HasPrefix(name, "hale_node_") || name == "hale_gpu_xid_errors_total"
}

// scrape gets /metrics as Prometheus does (gzip) and parses it.
func scrape(t testing.TB, m *metrics.Server) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler(""))
	defer srv.Close()
	resp, err := http.Get(srv.URL) // the client asks for gzip and decompresses
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !resp.Uncompressed {
		t.Error("/metrics was not compressed")
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// seriesByInstance counts the node series of a scrape by their instance_id label, and the
// nodes by health status.
func seriesByInstance(t *testing.T, m *metrics.Server) (map[string]int, map[string]float64) {
	t.Helper()
	by := map[string]int{}
	statuses := map[string]float64{}
	for name, fam := range scrape(t, m) {
		if !isNodeMetric(name) {
			continue
		}
		for _, s := range fam.GetMetric() {
			id := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "instance_id" {
					id = l.GetValue()
				}
				if name == "hale_node_health_status" && l.GetName() == "status" {
					statuses[l.GetValue()] += s.GetGauge().GetValue()
				}
			}
			by[id]++
		}
	}
	return by, statuses
}

// TestNodeSeriesAreBoundedAt10000Nodes: 10,000 nodes' samples (8 GPUs, 2 file systems and 2
// interfaces each, as an agent of a p5 sends them) give exactly SeriesPerNode(2, 2, 8) series
// per node, every one labelled with its node; a node whose agent sends far more (10 file
// systems, 40 interfaces, 32 GPUs, unknown CPU modes, a GPU twice) still has at most
// MaxSeriesPerNode. The health statuses count every
// node once.
func TestNodeSeriesAreBoundedAt10000Nodes(t *testing.T) {
	const n = 10000
	st, f := newFleet(t, n, func(i int) *agentproto.NodeMetrics {
		if i == 7 {
			m := sample(40, 32)
			for i := range 8 {
				m.Filesystems = append(m.Filesystems, &agentproto.Filesystem{Mountpoint: fmt.Sprintf("/data%d", i), SizeBytes: 1})
			}
			m.Cpu = append(m.Cpu, &agentproto.CPUMode{Mode: "guest", Seconds: 1}, &agentproto.CPUMode{Mode: "user", Seconds: 2})
			m.Gpus = append(m.Gpus, m.Gpus[0])
			return m
		}
		return sample(2, 8)
	})
	m := metrics.New(st, f)
	by, statuses := seriesByInstance(t, m)
	if by[""] != 0 {
		t.Errorf("%d node series without an instance_id", by[""])
	}
	if len(by) != n {
		t.Fatalf("node series name %d instances, want %d", len(by), n)
	}
	want := metrics.SeriesPerNode(2, 2, 8)
	for id, c := range by {
		if id == fmt.Sprintf("i-%017d", 7) {
			if c != metrics.MaxSeriesPerNode || metrics.MaxSeriesPerNode != metrics.SeriesPerNode(agentproto.MaxFilesystems, agentproto.MaxNetInterfaces, agentproto.MaxGPUs) {
				t.Errorf("the node that sent 10 file systems, 40 interfaces and 32 GPUs has %d series, want the bound %d", c, metrics.MaxSeriesPerNode)
			}
			continue
		}
		if c != want {
			t.Errorf("node %s has %d series, want %d", id, c, want)
		}
	}
	repairing := float64((n + 2) / 3)
	if statuses["UnschedulablePendingReplacement"] != repairing || statuses["Schedulable"] != n-repairing || len(statuses) != 2 {
		t.Errorf("health statuses %v, want %v pending replacement and the rest schedulable", statuses, repairing)
	}
	t.Logf("%d nodes: %d series per node (8 GPUs, 2 file systems, 2 interfaces), bound %d", n, want, metrics.MaxSeriesPerNode)
}

// TestNodeMetricsNameTheNode: a node's series carry its cluster, group, instance id and
// orchestrator name, the values it sent, and the GPU labels dcgm-exporter uses; a sample of a
// node the store does not have is not shown; a node without a sample shows only its health.
func TestNodeMetricsNameTheNode(t *testing.T) {
	st, f := newFleet(t, 2, func(int) *agentproto.NodeMetrics { return sample(1, 1) })
	f.samples[1].Metrics.Gpus[0].LastXid, f.samples[1].Metrics.Gpus[0].XidCount = 79, 2
	f.samples = append(f.samples, agentserver.NodeSample{InstanceID: "i-gone", Metrics: sample(1, 1), Received: time.Now()})
	f.samples = f.samples[1:] // node 0 sent none
	fams := scrape(t, metrics.New(st, f))
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "i-gone" {
					t.Error("a sample of a node the store does not have is shown")
				}
			}
		}
	}
	xid := fams["DCGM_FI_DEV_XID_ERRORS"]
	if xid == nil || len(xid.GetMetric()) != 1 {
		t.Fatalf("DCGM_FI_DEV_XID_ERRORS: %v", xid)
	}
	labels := map[string]string{}
	for _, l := range xid.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	wantLabels := map[string]string{"cluster": "fleet", "instance_group": "workers", "instance_id": "i-00000000000000001", "node": "ip-10-1-0-1",
		"gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-000000000000", "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3",
		"Hostname": "ip-10-1-0-1"}
	for k, v := range wantLabels {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, labels[k], v, labels)
		}
	}
	if v := xid.GetMetric()[0].GetGauge().GetValue(); v != 79 {
		t.Errorf("last Xid %v, want 79", v)
	}
	if v := fams["hale_gpu_xid_errors_total"].GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Errorf("Xid count %v, want 2", v)
	}
	if h := fams["hale_node_health_status"]; h == nil || len(h.GetMetric()) != 2 {
		t.Errorf("want a health status for both nodes: %v", h)
	}
	if l := fams["node_load1"]; l == nil || len(l.GetMetric()) != 1 {
		t.Errorf("want node_load1 of the one node with a sample: %v", l)
	}
}

// A repair replaces a node about 2 s after the Xid it is for: the store names the new instance
// at once, and the old instance's samples (while its session lasts, then its last one, ended)
// are shown under the labels the last scrape gave it, with no health status, so that
// Prometheus sees the Xid, until the server stops handing them out; an instance no scrape
// named is not shown.
func TestReplacedNodesLastSampleShown(t *testing.T) {
	st, f := newFleet(t, 2, func(int) *agentproto.NodeMetrics { return sample(1, 1) })
	m := metrics.New(st, f)
	scrape(t, m) // names i-0…0 and i-0…1
	old := f.samples[0]
	old.Metrics.Gpus[0].LastXid, old.Metrics.Gpus[0].XidCount, old.Ended = 79, 1, true
	err := st.Write(context.Background(), func(tx store.Tx) error {
		nodes, err := tx.NodesOf("fleetfleetfl")
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.InstanceID == old.InstanceID {
				n.InstanceID = "i-10000000000000000"
				return tx.UpdateNode(n)
			}
		}
		return fmt.Errorf("no node %s", old.InstanceID)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.samples = []agentserver.NodeSample{old, f.samples[1], {InstanceID: "i-20000000000000000", Metrics: sample(1, 1), Received: time.Now(), Ended: true}}
	for _, ended := range []bool{false, true} { // the old instance's session lasts until it is retired, then its sample is kept
		f.samples[0].Ended = ended
		fams := scrape(t, m)
		xids := map[string]float64{}
		for _, s := range fams["hale_gpu_xid_errors_total"].GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			xids[labels["instance_id"]] = s.GetCounter().GetValue()
			if labels["instance_id"] == old.InstanceID && (labels["node"] != "ip-10-1-0-0" || labels["instance_group"] != "workers" || labels["cluster"] != "fleet") {
				t.Errorf("the replaced instance's labels: %v", labels)
			}
		}
		if len(xids) != 2 || xids[old.InstanceID] != 1 || xids["i-00000000000000001"] != 0 {
			t.Errorf("session ended %v: Xid counts by instance %v, want the replaced instance's 1 and the other node's 0", ended, xids)
		}
		health := map[string]bool{}
		for _, s := range fams["hale_node_health_status"].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "instance_id" {
					health[l.GetValue()] = true
				}
			}
		}
		if len(health) != 2 || !health["i-10000000000000000"] || !health["i-00000000000000001"] {
			t.Errorf("health statuses of %v, want the store's two instances", health)
		}
	}
	f.samples = f.samples[1:] // the ended sample went stale
	if by, _ := seriesByInstance(t, m); by[old.InstanceID] != 0 {
		t.Errorf("the replaced instance has %d series after its sample went", by[old.InstanceID])
	}
}

// BenchmarkMetricsScrape measures one scrape of /metrics with 1,000 and 10,000 nodes (8 GPUs,
// 2 interfaces each; a third in repair), asking for gzip as Prometheus does: the time per
// scrape, the bytes on the wire and uncompressed, and the series.
// Run: go test ./internal/metrics -run '^$' -bench MetricsScrape -benchtime 5x
func BenchmarkMetricsScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			st, f := newFleet(b, n, func(int) *agentproto.NodeMetrics { return sample(2, 8) })
			srv := httptest.NewServer(metrics.New(st, f).Handler(""))
			defer srv.Close()
			var wire []byte
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client leaves the body compressed
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				wire, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Content-Encoding") != "gzip" {
					b.Fatalf("not compressed: %s", resp.Header.Get("Content-Encoding"))
				}
			}
			b.StopTimer()
			zr, err := gzip.NewReader(bytes.NewReader(wire))
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(zr)
			b.ReportMetric(float64(len(wire)), "gzip-bytes/scrape")
			b.ReportMetric(float64(len(body)), "bytes/scrape")
			b.ReportMetric(float64(bytes.Count(body, []byte("\n"))-bytes.Count(body, []byte("\n#"))), "series/scrape")
		})
	}
}

// A sample of an agent before capability 12 has no aggregate ECC, violation, NVLink or
// free-space series (its zeros would read as "no errors" and "a full disk"), and its root file
// system shows size and available space under mountpoint "/" as before; a capability-12
// agent's node has every one, its file systems labelled as node-exporter labels them.
func TestOlderAgentsShowNoZeros(t *testing.T) {
	st, f := newFleet(t, 2, func(int) *agentproto.NodeMetrics { return sample(1, 1) })
	f.samples[0].Capability = 11
	f.samples[0].Metrics.Filesystems = nil
	fams := scrape(t, metrics.New(st, f))
	per := func(name string) map[string]int {
		by := map[string]int{}
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "instance_id" {
					by[l.GetValue()]++
				}
			}
		}
		return by
	}
	old, cur := "i-00000000000000000", "i-00000000000000001"
	for _, name := range []string{"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "node_filesystem_free_bytes"} {
		if by := per(name); by[old] != 0 || by[cur] == 0 {
			t.Errorf("%s: %v series by instance, want none of %s and some of %s", name, by, old, cur)
		}
	}
	if by := per("node_filesystem_avail_bytes"); by[old] != 1 || by[cur] != 2 {
		t.Errorf("node_filesystem_avail_bytes by instance %v, want the older agent's root and both of the newer's", by)
	}
	for _, m := range fams["node_filesystem_free_bytes"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["device"] == "" || labels["fstype"] != "ext4" || labels["mountpoint"] == "" {
			t.Errorf("a file system's labels: %v", labels)
		}
	}
}
