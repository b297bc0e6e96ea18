package resume

import "testing"

// scontrol show job -d of Slurm 26.05.5 (TestSlurmVersions on sid), the lines that say what a
// job holds: a job that shares GPU nodes without asking for GPUs (26.05 says OverSubscribe=NO
// for it, where 22.05 and 24.11 said OK), an --exclusive one and a --gres=gpu:1 one.
const (
	sharedJob = `   JOB_GRES=(null)
     Nodes=ip-10-201-0-[10,12] CPU_IDs=0 Mem=0 GRES=
   OverSubscribe=NO Exclusive=NO Contiguous=0 Licenses=(null) LicensesAlloc=(null) Network=(null)`
	exclusiveJob = `   AllocTRES=cpu=4,node=2,billing=4,gres/gpu=2
   JOB_GRES=gpu:2
     Nodes=ip-10-201-0-[10,12] CPU_IDs=0-1 Mem=0 GRES=gpu:1(IDX:0)
   OverSubscribe=NO Exclusive=NODE Contiguous=0 Licenses=(null) LicensesAlloc=(null) Network=(null)`
	gresJob = `   JOB_GRES=gpu:2
     Nodes=ip-10-201-0-[10,12] CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)
   TresPerNode=gres/gpu:1`
)

func TestGRESHeld(t *testing.T) {
	for _, c := range []struct {
		name, detail string
		want         bool
	}{
		{"shared, no GRES", sharedJob, false},
		{"exclusive on GPU nodes", exclusiveJob, true},
		{"--gres=gpu:1", gresJob, true},
		{"one node of several holds a GPU", "JOB_GRES=(null)\n Nodes=a CPU_IDs=0 Mem=0 GRES=\n Nodes=b CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)", true},
	} {
		if got := gresHeld(c.detail); got != c.want {
			t.Errorf("%s: gresHeld = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGRESOfTresPerNode(t *testing.T) {
	for in, want := range map[string]string{"gres:gpu:1": "gpu:1", "gres/gpu:1": "gpu:1", "gres/gpu": "gpu", "cpu=2": "", "": ""} {
		if got := gresOf(in); got != want {
			t.Errorf("gresOf(%q) = %q, want %q", in, got, want)
		}
	}
}
