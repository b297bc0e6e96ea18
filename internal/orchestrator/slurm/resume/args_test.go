package resume

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args       string
		auto       bool
		srun       string
		alloc      string
		policy     string
		wantErrSub string
	}{
		{args: "--auto-resume=1 -N2 python3 train.py --auto-resume=0", auto: true, srun: "-N2 python3 train.py --auto-resume=0", alloc: "-N2"},
		{args: "-N 2 --auto-resume 1 --ntasks-per-node 1 -l hostname", auto: true, srun: "-N 2 --ntasks-per-node 1 -l hostname", alloc: "-N 2 --ntasks-per-node 1"},
		{args: "--auto-resume=0 -p gpu --gres=gpu:1 nvidia-smi -L", srun: "-p gpu --gres=gpu:1 nvidia-smi -L", alloc: "-p gpu --gres=gpu:1"},
		{args: "--partition gpu --exclusive --label --auto-resume=1 -- sh -c true", auto: true, srun: "--partition gpu --exclusive --label sh -c true", alloc: "--partition gpu --exclusive"},
		{args: "-lN2 --time=10 --mpi pmi2 a.out", srun: "-lN2 --time=10 --mpi pmi2 a.out", alloc: "--time=10"},
		{args: "--auto-resume=yes true", wantErrSub: "1 (on) or 0 (off)"},
		{args: "--auto-resume", wantErrSub: "needs a value"},
		{args: "--run-policy=/fsx/p.yaml -N2 train", srun: "-N2 train", alloc: "-N2", policy: "/fsx/p.yaml"},
		{args: "--auto-resume=1 --run-policy /fsx/p.yaml train --run-policy=x", auto: true, srun: "train --run-policy=x", policy: "/fsx/p.yaml"},
		{args: "--run-policy", wantErrSub: "--run-policy needs a value"},
		{args: "--run-policy= true", wantErrSub: "--run-policy= is empty"},
	} {
		a, err := Parse(strings.Fields(c.args))
		if c.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrSub) {
				t.Errorf("Parse(%q) error %v, want one with %q", c.args, err, c.wantErrSub)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.args, err)
		}
		if a.AutoResume != c.auto || a.RunPolicy != c.policy || !reflect.DeepEqual(a.Srun(), strings.Fields(c.srun)) || strings.Join(a.Alloc(), " ") != c.alloc {
			t.Errorf("Parse(%q) = auto %v, srun %q, alloc %q; want %v, %q, %q", c.args, a.AutoResume, a.Srun(), a.Alloc(), c.auto, c.srun, c.alloc)
		}
	}
}

func TestSetEnv(t *testing.T) {
	got := setEnv([]string{"A=1", "SLURM_NNODES=1", "B=2"}, map[string]string{"SLURM_NNODES": "2"})
	if want := []string{"A=1", "B=2", "SLURM_NNODES=2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("setEnv = %v, want %v", got, want)
	}
}
