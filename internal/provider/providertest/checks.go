package providertest

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/provider"
)

// checkLaunched fails the test unless inst is a running instance of spec with an address and a
// hostname.
func checkLaunched(t testing.TB, inst *provider.Instance, spec provider.LaunchSpec) {
	t.Helper()
	if inst == nil {
		t.Fatalf("launch %s returned no instance", spec.InstanceID)
	}
	var bad []string
	for _, f := range []struct{ name, got, want string }{
		{"ID", inst.ID, spec.InstanceID},
		{"ClusterID", inst.ClusterID, spec.ClusterID},
		{"GroupName", inst.GroupName, spec.GroupName},
		{"LogicalID", inst.LogicalID, spec.LogicalID},
		{"InstanceType", inst.InstanceType, spec.InstanceType},
		{"State", string(inst.State), string(provider.Running)},
	} {
		if f.got != f.want {
			bad = append(bad, fmt.Sprintf("%s %q, want %q", f.name, f.got, f.want))
		}
	}
	if _, err := provider.ParseIP(inst.IP); err != nil {
		bad = append(bad, err.Error())
	}
	if inst.Hostname == "" {
		bad = append(bad, "no Hostname")
	}
	if inst.LaunchTime.IsZero() {
		bad = append(bad, "no LaunchTime")
	}
	if len(bad) > 0 {
		t.Fatalf("launch %s returned %+v: %s", spec.InstanceID, *inst, strings.Join(bad, "; "))
	}
}

// differ says how got differs from want ("" when it does not): every field, the launch time
// as an instant, an empty list as none.
func differ(got, want *provider.Instance) string {
	if got == nil || want == nil {
		return fmt.Sprintf("%v, want %v", got, want)
	}
	g, w := *got, *want
	if !g.LaunchTime.Equal(w.LaunchTime) {
		return fmt.Sprintf("LaunchTime %v, want %v", g.LaunchTime, w.LaunchTime)
	}
	g.LaunchTime, w.LaunchTime = time.Time{}, time.Time{}
	if len(g.NetworkNodes) == 0 {
		g.NetworkNodes = nil
	}
	if len(w.NetworkNodes) == 0 {
		w.NetworkNodes = nil
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("%+v, want %+v", g, w)
	}
	return ""
}

// same fails the test when got is not want.
func (e *env) same(what string, got, want *provider.Instance) {
	e.t.Helper()
	if d := differ(got, want); d != "" {
		e.t.Errorf("%s: %s", what, d)
	}
}

// describe is Describe of inst, which must be inst.
func (e *env) describe(what string, inst *provider.Instance) {
	e.t.Helper()
	got, err := e.p.Describe(e.ctx, inst.ID)
	if err != nil {
		e.t.Errorf("%s: describe %s: %v", what, inst.ID, err)
		return
	}
	e.same(what+": Describe", got, inst)
}

// list checks that List returns exactly want (by id, any order), each as want has it.
func (e *env) list(what string, want ...*provider.Instance) {
	e.t.Helper()
	got, err := e.p.List(e.ctx)
	if err != nil {
		e.t.Errorf("%s: list: %v", what, err)
		return
	}
	ids := func(l []*provider.Instance) []string {
		var out []string
		for _, i := range l {
			out = append(out, i.ID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		e.t.Errorf("%s: List has %v, want %v", what, ids(got), ids(want))
		return
	}
	for _, g := range got {
		for _, w := range want {
			if g.ID == w.ID {
				e.same(what+": List", g, w)
			}
		}
	}
}

// gone checks that the provider knows nothing of id: Describe is provider.ErrNotFound, and
// AgentRunning does not say an agent runs.
func (e *env) gone(what, id string) {
	e.t.Helper()
	if inst, err := e.p.Describe(e.ctx, id); !errors.Is(err, provider.ErrNotFound) {
		e.t.Errorf("%s: Describe %s = %v, %v; want provider.ErrNotFound", what, id, inst, err)
	}
	if running, err := e.p.AgentRunning(e.ctx, id); err == nil && running {
		e.t.Errorf("%s: AgentRunning %s says an agent runs", what, id)
	}
}

// machines checks that n machines run an instance.
func (e *env) machines(what string, n int) {
	e.t.Helper()
	got, err := e.m.Running()
	if err != nil {
		e.t.Errorf("%s: the machines: %v", what, err)
	} else if got != n {
		e.t.Errorf("%s: %d machines run an instance, want %d", what, got, n)
	}
}

// agentPoll is how often AgentRunning is asked while the suite waits for an agent.
const agentPoll = 100 * time.Millisecond

// agent waits (Subject.AgentWithin) until AgentRunning of inst is want.
func (e *env) agent(what string, inst *provider.Instance, want bool) {
	e.t.Helper()
	within := cmp.Or(e.s.AgentWithin, 15*time.Second)
	deadline := time.Now().Add(within)
	for {
		got, err := e.p.AgentRunning(e.ctx, inst.ID)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("%s: AgentRunning %s is %v (%v) after %s, want %v", what, inst.ID, got, err, within, want)
			return
		}
		time.Sleep(agentPoll)
	}
}

// bootID is the boot id of inst's machine.
func (e *env) bootID(inst *provider.Instance) string {
	e.t.Helper()
	id, err := e.m.BootID(inst)
	if err != nil || strings.TrimSpace(id) == "" {
		e.t.Fatalf("the boot id of %s's machine: %q, %v", inst.ID, id, err)
	}
	return strings.TrimSpace(id)
}
