package store

import (
	"encoding/json"
	"testing"

	"github.com/haleproject/hale/internal/health"
)

// A finding recorded before the record embedded health.Finding (its fields were the record's
// own, Action a string) reads the same, and a record written now has the same JSON names.
func TestFindingRecordsReadAcrossTheEmbedding(t *testing.T) {
	old := `{"At":"2026-12-01T10:00:00Z","Fault":"gpu.bus_lost","Action":"Replace","Decision":"Replace","Xid":79,` +
		`"PCI":"0000:12:00","GPU":2,"Evidence":"NVRM: Xid 79","Monitor":"kernel-log","RepairID":"r-1","Lines":3,"PID":42,"Job":"7"}`
	var f Finding
	if err := json.Unmarshal([]byte(old), &f); err != nil {
		t.Fatal(err)
	}
	want := health.Finding{Fault: "gpu.bus_lost", Action: health.Replace, Xid: 79, PCI: "0000:12:00", GPU: 2, Evidence: "NVRM: Xid 79", Lines: 3, PID: 42, Job: "7"}
	if f.Finding != want || f.Decision != "Replace" || f.Monitor != "kernel-log" || f.RepairID != "r-1" {
		t.Fatalf("read %+v", f)
	}
	b, err := json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	var again map[string]any
	json.Unmarshal(b, &again)
	for _, k := range []string{"Fault", "Action", "Xid", "PCI", "GPU", "Evidence", "Lines", "PID", "Job", "Decision", "Monitor", "RepairID"} {
		if _, ok := again[k]; !ok {
			t.Errorf("the record written now has no %s: %s", k, b)
		}
	}
	for _, k := range []string{"Time", "Uptime", "Repeat", "Finding"} {
		if _, ok := again[k]; ok {
			t.Errorf("the record written now has %s, which the agent's reading keeps to itself: %s", k, b)
		}
	}
}
