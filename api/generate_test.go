package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the wire types, checks, shape table and operation
// table from the model and compares them with the committed files: every shape in package api
// comes from the model, and nobody edited a generated file by hand.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/gen", "-model", "model/sagemaker-cluster-shapes.json", "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.gen.go"))
	if len(files) != 4 {
		t.Fatalf("generator wrote %d files, want 4", len(files))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		have, err := os.ReadFile(filepath.Base(f))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is not what the generator writes from the model; run go generate ./api", filepath.Base(f))
		}
	}
}

// TestEveryOperationIsTabled checks the generated table against the model's 30 operations and
// that each input type validates through its generated method.
func TestEveryOperationIsTabled(t *testing.T) {
	if len(Operations) != 30 {
		t.Fatalf("%d operations, want the model's 30", len(Operations))
	}
	for _, op := range Operations {
		in := op.NewInput()
		if _, ok := in.(interface{ Validate() error }); !ok {
			t.Errorf("%s input has no Validate", op.Name)
		}
		if Shapes[op.InputShape] == nil || (op.OutputShape != "" && Shapes[op.OutputShape] == nil) {
			t.Errorf("%s: shapes missing from the table", op.Name)
		}
	}
}
