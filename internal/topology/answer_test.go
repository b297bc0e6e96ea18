package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopologyAnswerNextToken: ReadAnswer keeps the NextToken of the last page, so that a file
// holding one page of several can be told from a whole answer; pages concatenated up to the
// last one (which has none) are a whole answer.
func TestTopologyAnswerNextToken(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "ec2-docs-example1.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := ReadAnswer(f)
	if err != nil || a.NextToken != "SomeEncryptedToken" || len(a.Instances) != 2 {
		t.Fatalf("the EC2 docs' example: %+v, %v", a, err)
	}
	for in, want := range map[string]string{
		`{"Instances": [{"InstanceId": "i-1"}], "NextToken": "t1"} {"Instances": [{"InstanceId": "i-2"}]}`:                    "",
		`{"Instances": [{"InstanceId": "i-1"}], "NextToken": "t1"} {"Instances": [{"InstanceId": "i-2"}], "NextToken": "t2"}`: "t2",
		`{"Instances": [], "NextToken": null}`: "",
	} {
		a, err := ReadAnswer(strings.NewReader(in))
		if err != nil || a.NextToken != want {
			t.Errorf("%s: NextToken %q, %v; want %q", in, a.NextToken, err, want)
		}
	}
	if !NoCapacityBlock("null") || !NoCapacityBlock("") || NoCapacityBlock("cr-0123") {
		t.Error("NoCapacityBlock")
	}
}
