//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/image"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// The tests here run real slurmctld, slurmd and munged (Debian's slurm-wlm and munge) inside
// the namespace nodes, started by hale's agents, and drive them from the login node as a user
// would: sinfo, srun, sbatch, scontrol.

// exampleBundle copies examples/s3/sagemaker-hale-lifecycle/base-config (the README's
// lifecycle scripts, whose lifecycle_script.py waits for the controller address in slurm.conf)
// into the test's object store and returns its S3 URI.
func (e *env) exampleBundle() string { return e.exampleScripts("base-config") }

// exampleScripts copies examples/s3/sagemaker-hale-lifecycle/NAME into the test's object store
// and returns its S3 URI.
func (e *env) exampleScripts(name string) string {
	src := filepath.Join("..", "..", "examples", "s3", "sagemaker-hale-lifecycle", name)
	entries, err := os.ReadDir(src)
	if err != nil {
		e.t.Fatal(err)
	}
	var uri string
	for _, en := range entries {
		b, err := os.ReadFile(filepath.Join(src, en.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		uri = e.script(name, en.Name(), string(b))
	}
	return uri
}

// eventually polls cond until it holds or within has passed; it fails the test with cond's
// last explanation.
func eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, last := poll(within, cond); !ok {
		t.Fatalf("%s: not so after %s; last: %s", what, within, last)
	}
}

// poll asks cond every 200 ms until it holds or within has passed; last is its last
// explanation.
func poll(within time.Duration, cond func() (bool, string)) (ok bool, last string) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ok, last = cond(); ok {
			return true, ""
		}
	}
	return false, last
}

// host is a node's Slurm name, its host name.
func host(n types.ClusterNodeSummary) string {
	h, _, _ := strings.Cut(aws.ToString(n.PrivateDnsHostname), ".")
	return h
}

func byGroup(nodes []types.ClusterNodeSummary, group string) []types.ClusterNodeSummary {
	var out []types.ClusterNodeSummary
	for _, n := range nodes {
		if aws.ToString(n.InstanceGroupName) == group {
			out = append(out, n)
		}
	}
	return out
}

// sinfoIdle waits until sinfo on the login node shows every listed node idle.
func (e *env) waitIdle(t testing.TB, login string, names ...string) {
	t.Helper()
	eventually(t, 60*time.Second, "nodes "+strings.Join(names, ",")+" idle", func() (bool, string) {
		out, err := e.onNode(login, "sinfo -h -N -o '%N %t'")
		if err != nil {
			return false, out
		}
		state := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				state[f[0]] = f[1]
			}
		}
		for _, n := range names {
			if state[n] != "idle" {
				return false, out
			}
		}
		return true, ""
	})
}

// TestSlurmCluster: a cluster with a controller, a login node and three workers in two
// partitions is a working Slurm cluster. srun and sbatch run on the workers, the partitions
// match the groups, a GPU is handed to a job, a scale-up node joins dev and its partition
// and runs a job, BatchDelete removes a node from Slurm, Managed drift is refused (and Merge
// keeps the operator's edit), Action:Replace is recorded and drained, and a replaced node
// comes back under its Slurm name.
func TestSlurmCluster(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.exampleBundle()
	groups := withFSx([]types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	})
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("slurm"), InstanceGroups: groups, VpcConfig: vpc,
		Orchestrator: &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: types.ClusterSlurmConfigStrategyManaged}}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("slurm", types.ClusterStatusInservice, 90*time.Second)
	nodes := e.nodes("slurm")
	login := aws.ToString(byGroup(nodes, "login")[0].InstanceId)
	ctl := aws.ToString(byGroup(nodes, "controller")[0].InstanceId)
	var workers, gpus []string
	for _, n := range append(byGroup(nodes, "gpu"), byGroup(nodes, "cpu")...) {
		workers = append(workers, host(n))
	}
	for _, n := range byGroup(nodes, "gpu") {
		gpus = append(gpus, host(n))
	}
	sort.Strings(workers)
	sort.Strings(gpus)
	cpuHost := host(byGroup(nodes, "cpu")[0])
	e.waitIdle(t, login, workers...)

	// The example lifecycle script found the controller's address in slurm.conf.
	if out := e.logStream("slurm", "LifecycleConfig/cpu/"+aws.ToString(byGroup(nodes, "cpu")[0].InstanceId)); !strings.Contains(out, "names the controller") {
		t.Errorf("the lifecycle script did not see slurm.conf:\n%s", out)
	}

	t.Run("partitions", func(t *testing.T) {
		e := e.in(t)
		out, err := e.onNode(login, "sinfo -h -o '%R %N' | sort; scontrol show partition dev | grep -o 'Default=[A-Z]*'")
		if err != nil {
			t.Fatal(err, out)
		}
		want := "cpu " + cpuHost + "\ndev " + slurm.Hostlist(workers) + "\ngpu " + slurm.Hostlist(gpus) + "\nDefault=YES\n"
		if out != want {
			t.Errorf("sinfo:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("srun", func(t *testing.T) {
		e := e.in(t)
		out, err := e.onNode(login, "srun -N3 hostname | sort")
		if err != nil {
			t.Fatal(err, out)
		}
		if got := strings.Fields(out); !slices.Equal(got, workers) {
			t.Errorf("srun -N3 hostname = %q, want %q", got, workers)
		}
		out, err = e.onNode(login, "srun -p gpu --gres=gpu:1 sh -c 'echo $CUDA_VISIBLE_DEVICES'")
		if err != nil || strings.TrimSpace(out) != "0" {
			t.Errorf("a GPU job sees CUDA_VISIBLE_DEVICES=%q (%v)", out, err)
		}
	})

	// Nodes have NVIDIA's device files and every mount point they need, and the host gets none.
	t.Run("node file system", func(t *testing.T) {
		e := e.in(t)
		gpuNode := aws.ToString(byGroup(nodes, "gpu")[0].InstanceId)
		out, err := e.onNode(gpuNode, "stat -c '%n %F %t:%T' /dev/nvidia0 /dev/nvidiactl; grep -o 'File=[^ ]*' /etc/slurm/gres.conf | sort -u; ls -d /fsx /opt/ml /opt/sagemaker_cluster /opt/slurm/etc /dev/null")
		want := "/dev/nvidia0 character special file c3:0\n/dev/nvidiactl character special file c3:ff\nFile=/dev/nvidia0\n" +
			"/dev/null\n/fsx\n/opt/ml\n/opt/sagemaker_cluster\n/opt/slurm/etc\n"
		if err != nil || out != want {
			t.Errorf("on a gpu node:\n%s(%v)\nwant:\n%s", out, err, want)
		}
		if made := hostPathsCreated(); len(made) > 0 {
			t.Errorf("nodes created %v on the host", made)
		}
		// hale exec starts in the user's home directory inside the node's own root, where
		// Slurm's commands (which need a working directory) run.
		home, _ := os.UserHomeDir()
		out2, err := e.hale("exec", "--cluster-name", "slurm", "--node-id", login, "--", "sh", "-c", "pwd; srun -N1 -p cpu hostname").CombinedOutput()
		if err != nil || string(out2) != home+"\n"+cpuHost+"\n" {
			t.Errorf("hale exec -- sh -c 'pwd; srun -N1 -p cpu hostname':\n%s(%v)\nwant %s and %s", out2, err, home, cpuHost)
		}
	})

	t.Run("a default group's node boots from the default image, isolated from the host", func(t *testing.T) {
		e := e.in(t)
		// These groups name no ImageId: the node's root is an overlay whose lower layer is the
		// machine's default image, it sees none of the host's own files (this checkout, the
		// host's Go), and what it writes to its root lands in its own upper layer only.
		if os.Getenv("HALE_E2E_DEFAULT_IMAGE") == "host" {
			t.Skip("HALE_E2E_DEFAULT_IMAGE=host: the nodes run on the host's root")
		}
		cpuNode := aws.ToString(byGroup(nodes, "cpu")[0].InstanceId)
		checkout, _ := filepath.Abs(".")
		out, err := e.onNode(cpuNode, "awk '$5 == \"/\" {for (i = 7; i < NF; i++) if ($i == \"-\") print $(i+1), $(i+3)}' /proc/self/mountinfo | tr ' ,' '\\n\\n' | grep -E '^overlay$|^lowerdir='; "+
			"for p in "+checkout+" /usr/local/go; do test -e $p && echo host file $p; done; echo written > /etc/node-marker")
		lower := filepath.Join(image.DefaultDir, "rootfs")
		if d := os.Getenv("HALE_E2E_DEFAULT_IMAGE"); d != "" {
			lower = filepath.Join(d, "rootfs")
		}
		if want := "overlay\nlowerdir=" + lower + "\n"; err != nil || out != want {
			t.Errorf("the root of a default group's node:\n%s(%v)\nwant:\n%s", out, err, want)
		}
		upper := filepath.Join(e.Options.DataDir, "local", "instances", cpuNode, "rootfs", "upper", "etc", "node-marker")
		if b, err := os.ReadFile(upper); err != nil || string(b) != "written\n" {
			t.Errorf("the node's write is not in its upper layer %s: %q, %v", upper, b, err)
		}
		if _, err := os.Stat(filepath.Join(lower, "etc", "node-marker")); err == nil {
			t.Errorf("the node's write reached the image")
		}
		if _, err := os.Stat("/etc/node-marker"); err == nil {
			t.Errorf("the node's write reached the host")
		}
		e.checkNodeNamespaces(t, cpuNode)
		// hale image list and describe show the default image the node booted from.
		m := describeImage(t, e.Options.DataDir, image.Default)
		list, err := haleCLI(e.Options.DataDir, "image", "list")
		if m.ImageID != image.Default || m.Status != image.StatusAvailable || m.Suite != "bookworm" || m.Installed["python3-torch"] == "" ||
			err != nil || !strings.Contains(list, "default  ") || !strings.Contains(list, m.Installed["slurmd"]) {
			t.Errorf("hale image describe default: %+v\nhale image list: %s (%v)", m, list, err)
		}
		// PyTorch's BLAS on the node is OpenBLAS, not the reference loop (image.BLASPackage).
		if out, err := e.onNode(cpuNode, "readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3"); err != nil || !strings.Contains(out, "openblas") {
			t.Errorf("libblas.so.3 on the node is %q (%v), want OpenBLAS's", out, err)
		}
	})

	t.Run("sbatch", func(t *testing.T) {
		e := e.in(t)
		script := "#!/bin/bash\n#SBATCH -N 2 -p gpu -o /fsx/job-%j.out\nsrun hostname | sort\necho finished\n"
		out, err := e.onNode(login, "cat > /fsx/job.sh <<'EOF'\n"+script+"EOF\nsbatch --parsable /fsx/job.sh")
		if err != nil {
			t.Fatal(err, out)
		}
		id := strings.TrimSpace(out)
		eventually(t, 30*time.Second, "job "+id+" output", func() (bool, string) {
			out, _ := e.onNode(login, "cat /fsx/job-"+id+".out 2>&1")
			return strings.HasSuffix(out, "finished\n") && strings.Contains(out, gpus[0]) && strings.Contains(out, gpus[1]), out
		})
	})

	t.Run("describe shows the Slurm state", func(t *testing.T) {
		e := e.in(t)
		eventually(t, 10*time.Second, "Slurm state in DescribeClusterNode", func() (bool, string) {
			d, err := e.SDK.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("slurm"), NodeId: byGroup(nodes, "cpu")[0].InstanceId})
			if err != nil {
				return false, err.Error()
			}
			msg := aws.ToString(d.NodeDetails.InstanceStatus.Message)
			return msg == "Slurm node "+cpuHost+": idle", msg
		})
	})

	t.Run("a killed slurmd is started again, its logs kept", func(t *testing.T) {
		e := e.in(t)
		cpuID := aws.ToString(byGroup(nodes, "cpu")[0].InstanceId)
		pidOf := func() int {
			out, _ := e.onNode(cpuID, "cat /var/spool/slurmd/slurmd.pid 2>/dev/null")
			pid, _ := strconv.Atoi(strings.TrimSpace(out))
			return pid
		}
		old := pidOf()
		if old <= 0 {
			t.Fatal("no slurmd pid file on the cpu node")
		}
		// The pid file holds the node's own number (its PID namespace's): signal it from inside.
		if out, err := e.onNode(cpuID, "kill -KILL "+strconv.Itoa(old)); err != nil {
			t.Fatal(err, out)
		}
		eventually(t, 30*time.Second, "a new slurmd", func() (bool, string) {
			pid := pidOf()
			_, err := e.onNode(cpuID, "kill -0 "+strconv.Itoa(pid))
			return pid > 0 && pid != old && err == nil, strconv.Itoa(pid)
		})
		e.waitIdle(t, login, cpuHost)
		out, err := e.onNode(cpuID, "ls /var/log/slurm")
		if err != nil || !strings.Contains(out, "slurmd.log") || !strings.Contains(out, "slurmd.out") {
			t.Errorf("slurmd's logs: %v %q", err, out)
		}
	})

	t.Run("Managed drift is refused, Merge keeps the edit", func(t *testing.T) {
		e := e.in(t)
		if out, err := e.onNode(ctl, "echo 'PriorityWeightAge=1000' >> /opt/slurm/etc/slurm.conf"); err != nil {
			t.Fatal(err, out)
		}
		scale := func(strategy types.ClusterSlurmConfigStrategy) error {
			g := groups[3]
			g.InstanceCount = aws.Int32(2)
			in := &sagemaker.UpdateClusterInput{ClusterName: aws.String("slurm"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g}}
			if strategy != "" {
				in.Orchestrator = &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: strategy}}
			}
			_, err := e.SDK.UpdateCluster(ctx, in)
			return err
		}
		err := scale("")
		var conflict *types.ConflictException
		if !errors.As(err, &conflict) || !strings.Contains(err.Error(), "+ PriorityWeightAge=1000") {
			t.Fatalf("UpdateCluster over drift with Managed: %v", err)
		}
		if d := e.waitStatus("slurm", types.ClusterStatusInservice, time.Second); len(byGroup(e.nodes("slurm"), "cpu")) != 1 {
			t.Fatalf("the refused update changed the cluster: %v", d.ClusterStatus)
		}
		if err := scale(types.ClusterSlurmConfigStrategyMerge); err != nil {
			t.Fatalf("UpdateCluster with Merge: %v", err)
		}
		e.waitStatus("slurm", types.ClusterStatusInservice, 60*time.Second)
		conf, err := e.onNode(ctl, "cat /opt/slurm/etc/slurm.conf")
		if err != nil || !strings.Contains(conf, "PriorityWeightAge=1000") {
			t.Errorf("Merge lost the operator's line: %v\n%s", err, conf)
		}
	})

	var added string
	t.Run("scale-up node joins dev and its partition", func(t *testing.T) {
		e := e.in(t)
		for _, n := range byGroup(e.nodes("slurm"), "cpu") {
			if host(n) != cpuHost {
				added = host(n)
			}
		}
		if added == "" {
			t.Fatal("no new cpu node")
		}
		e.waitIdle(t, login, added)
		out, err := e.onNode(login, "sinfo -h -o '%R %N' | sort")
		if err != nil || !strings.Contains(out, "cpu "+slurm.Hostlist([]string{cpuHost, added})) || !strings.Contains(out, "dev "+slurm.Hostlist(append([]string{added}, workers...))) {
			t.Errorf("sinfo after scale-up: %v\n%s", err, out)
		}
		out, err = e.onNode(login, "srun -p cpu -w "+added+" hostname")
		if err != nil || strings.TrimSpace(out) != added {
			t.Errorf("srun on the new node: %q %v", out, err)
		}
	})

	t.Run("BatchDelete removes the node from Slurm", func(t *testing.T) {
		e := e.in(t)
		var id *string
		for _, n := range e.nodes("slurm") {
			if host(n) == added {
				id = n.InstanceId
			}
		}
		if id == nil {
			t.Skip("no scale-up node to delete") // the scale-up subtest failed and says why
		}
		if _, err := e.SDK.BatchDeleteClusterNodes(ctx, &sagemaker.BatchDeleteClusterNodesInput{ClusterName: aws.String("slurm"), NodeIds: []string{*id}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, added+" out of Slurm", func() (bool, string) {
			out, _ := e.onNode(login, "sinfo -h -o '%R %N' | sort; grep -c "+added+" /etc/slurm/slurm.conf")
			return !strings.Contains(out, added) && strings.HasSuffix(out, "\n0\n"), out
		})
		e.waitIdle(t, login, workers...)
		out, err := e.onNode(login, "srun -N3 hostname | sort")
		if err != nil || !slices.Equal(strings.Fields(out), workers) {
			t.Errorf("srun -N3 after the delete: %v %q", err, out)
		}
	})

	t.Run("Action:Replace drains and replaces the node; it comes back under its name", func(t *testing.T) {
		e := e.in(t)
		target, other := byGroup(nodes, "gpu")[0], byGroup(nodes, "gpu")[1]
		// Only the exact, case-sensitive reason asks for a repair.
		cmd := "scontrol update nodename=" + host(target) + " state=fail reason=Action:Replace && " +
			"scontrol update nodename=" + host(other) + " state=drain reason=action:replace"
		if out, err := e.onNode(login, cmd); err != nil {
			t.Fatal(err, out)
		}
		// The repair flow replaces the node: a new instance, the same address and Slurm name.
		var replacement string
		eventually(t, 60*time.Second, "the replacement back idle", func() (bool, string) {
			for _, n := range byGroup(e.nodes("slurm"), "gpu") {
				if host(n) == host(target) && aws.ToString(n.InstanceId) != aws.ToString(target.InstanceId) && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
					replacement = aws.ToString(n.InstanceId)
				}
			}
			return replacement != "" && e.slurmStates(login)[host(target)] == "idle", replacement
		})
		eventually(t, 10*time.Second, "the repair's timeline", func() (bool, string) {
			ev := e.events("slurm")
			for _, want := range []string{"is marked Action:Replace by an operator", "done in", "drained in Slurm (reason Action:Replace)", "replacing instance " + aws.ToString(target.InstanceId)} {
				if !strings.Contains(ev, want) {
					return false, fmt.Sprintf("events lack %q:\n%s", want, ev)
				}
			}
			return true, ""
		})
		for _, n := range e.storeNodes("slurm") {
			if n.InstanceID == aws.ToString(other.InstanceId) && (strings.Contains(n.Details.OrchestratorStatus, "requested") || n.Details.RepairStatus != "") {
				t.Errorf("a lowercase reason was taken for a request: %q %q", n.Details.OrchestratorStatus, n.Details.RepairStatus)
			}
		}
		if out, err := e.onNode(login, "scontrol update nodename="+host(other)+" state=resume"); err != nil {
			t.Fatal(err, out)
		}
		e.waitIdle(t, login, workers...)
		out, err := e.onNode(login, "srun -w "+host(target)+" hostname")
		if err != nil || strings.TrimSpace(out) != host(target) {
			t.Errorf("srun on the replaced node: %q %v", out, err)
		}
	})

	t.Run("Slurm's own Kill task failed drain is a finding: the node is rebooted and back", func(t *testing.T) {
		e := e.in(t)
		// slurmctld drains a node with this reason when a job step's processes do not die
		// (UnkillableStepTimeout); here the reason is set as slurmctld sets it.
		target := byGroup(e.nodes("slurm"), "gpu")[1]
		if out, err := e.onNode(login, "scontrol update nodename="+host(target)+" state=drain reason='Kill task failed'"); err != nil {
			t.Fatal(err, out)
		}
		eventually(t, 90*time.Second, "the node rebooted and back idle", func() (bool, string) {
			ev := e.events("slurm")
			return strings.Contains(ev, "Health: slurm.kill_task_failed") && strings.Contains(ev, "reboot instance "+aws.ToString(target.InstanceId)) &&
				e.slurmStates(login)[host(target)] == "idle", ev
		})
	})

	t.Run("a slurm.conf line that does not parse is refused; the daemons keep running", func(t *testing.T) {
		e := e.in(t)
		const typo = "PriorityWeightAgee=1000"
		// An operator's line with a typo on the controller, then a change that makes a new
		// rendering under Merge: before issue 27 the line was merged, written to every node
		// and read by a reconfigure.
		if out, err := e.onNode(ctl, "echo '"+typo+"' >> "+slurm.ConfPath); err != nil {
			t.Fatal(err, out)
		}
		g := groups[3]
		g.InstanceCount = aws.Int32(2)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("slurm"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
			Orchestrator: &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: types.ClusterSlurmConfigStrategyMerge}}}); err != nil {
			t.Fatal(err)
		}
		e.waitStatus("slurm", types.ClusterStatusInservice, 90*time.Second)
		line, _ := e.onNode(ctl, "grep -n '^"+typo+"$' "+slurm.RefusedPath+" | cut -d: -f1")
		want := fmt.Sprintf("%s line %s (%s): ", slurm.ConfPath, strings.TrimSpace(line), typo)
		eventually(t, 30*time.Second, "the refusal, naming the line", func() (bool, string) {
			ev := e.events("slurm")
			return strings.Contains(ev, "do not parse with the cluster's Slurm") && strings.Contains(ev, want), ev
		})
		if conf, err := e.onNode(ctl, "cat "+slurm.ConfPath); err != nil || strings.Contains(conf, typo) {
			t.Errorf("the controller's slurm.conf still has the refused line: %v", err)
		}
		var cpus []string
		for _, n := range byGroup(e.nodes("slurm"), "cpu") {
			cpus = append(cpus, host(n))
		}
		e.waitIdle(t, login, cpus...)
		// slurmctld restarts for the new node set (22.05 reads one only at start): with the
		// file it had, not the refused one.
		if out, _ := e.onNode(ctl, "cat /var/log/slurm/slurmctld.log /var/log/slurm/slurmctld.out"); strings.Contains(out, "PriorityWeightAgee") || strings.Contains(out, "Unable to process configuration file") {
			t.Errorf("slurmctld read the refused line:\n%s", out)
		}
		if ev := e.events("slurm"); strings.Contains(ev, "on instance "+ctl) && (strings.Contains(ev, "daemon.exited on instance "+ctl) || strings.Contains(ev, "reboot instance "+ctl)) {
			t.Errorf("the controller's daemons were disturbed:\n%s", ev)
		}
		if out, err := e.onNode(login, "srun -N2 -p cpu hostname | sort"); err != nil || len(strings.Fields(out)) != 2 {
			t.Errorf("srun on both cpu nodes: %v %q", err, out)
		}

		// A node's slurmd that cannot read its slurm.conf is a configuration fault: an Error
		// naming it, never a crash loop's reboot.
		cpu := aws.ToString(byGroup(e.nodes("slurm"), "cpu")[0].InstanceId)
		if out, err := e.onNode(cpu, "echo '"+typo+"' >> "+slurm.ConfPath+" && kill -KILL $(cat /var/spool/slurmd/slurmd.pid)"); err != nil {
			t.Fatal(err, out)
		}
		eventually(t, 60*time.Second, "slurmd refused its file four times", func() (bool, string) {
			out, _ := e.onNode(cpu, "grep -c 'Unable to process configuration file' /var/log/slurm/slurmd.out")
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			return n >= 4, out
		})
		ev := e.events("slurm")
		if !strings.Contains(ev, "Health: daemon.config_invalid on instance "+cpu) || !strings.Contains(ev, typo) {
			t.Errorf("no configuration fault named for %s:\n%s", cpu, ev)
		}
		if strings.Contains(ev, "daemon.crashloop on instance "+cpu) || strings.Contains(ev, "reboot instance "+cpu) {
			t.Errorf("a configuration fault was taken for the node's:\n%s", ev)
		}
		if out, err := e.onNode(cpu, "sed -i '/^"+typo+"$/d' "+slurm.ConfPath); err != nil {
			t.Fatal(err, out)
		}
		e.waitIdle(t, login, cpus...)
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("slurm")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("slurm", 60*time.Second)
}

// TestSlurmRolesFromProvisioningParameters: a cluster without SlurmConfig whose lifecycle
// bundle has a provisioning_parameters.json (the older way to declare roles) becomes a Slurm
// cluster with the controller, login and worker groups and partitions it names.
func TestSlurmRolesFromProvisioningParameters(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	e.script("legacy", "provisioning_parameters.json", `{
  "version": "1.0.0",
  "workload_manager": "slurm",
  "controller_group": "head",
  "login_group": "entry",
  "worker_groups": [{"instance_group_name": "workers", "partition_name": "batch"}]
}
`)
	lc := e.script("legacy", "on_create.sh", "#!/bin/bash\nset -e\ngrep -q '^SlurmctldHost=' /opt/slurm/etc/slurm.conf\necho ok\n")
	plain := func(name, typ string, count int32) types.ClusterInstanceGroupSpecification {
		return types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String(name), InstanceType: types.ClusterInstanceType(typ),
			InstanceCount: aws.Int32(count), ExecutionRole: aws.String(role),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("legacy"), VpcConfig: vpc,
		InstanceGroups: []types.ClusterInstanceGroupSpecification{plain("head", "ml.c5.xlarge", 1), plain("entry", "ml.m5.xlarge", 1), plain("workers", "ml.c5.2xlarge", 2)}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("legacy", types.ClusterStatusInservice, 90*time.Second)
	nodes := e.nodes("legacy")
	entry := aws.ToString(byGroup(nodes, "entry")[0].InstanceId)
	var workers []string
	for _, n := range byGroup(nodes, "workers") {
		workers = append(workers, host(n))
	}
	sort.Strings(workers)
	e.waitIdle(t, entry, workers...)
	out, err := e.onNode(entry, "sinfo -h -o '%R %N' | sort; srun -N2 -p batch hostname | sort")
	want := "batch " + slurm.Hostlist(workers) + "\ndev " + slurm.Hostlist(workers) + "\n" + strings.Join(workers, "\n") + "\n"
	if err != nil || out != want {
		t.Errorf("from the login group: %v\n%s\nwant:\n%s", err, out, want)
	}
	if ev := e.events("legacy"); !strings.Contains(ev, "Slurm roles (from provisioning_parameters.json): controller group head; login group entry; compute groups workers (partition batch)") {
		t.Errorf("events:\n%s", ev)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("legacy")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("legacy", 60*time.Second)
}
