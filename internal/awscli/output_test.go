package awscli

import (
	"os"
	"testing"
)

// TestFormattersMatchTheAWSCLI compares the table and text output with what the AWS CLI's own
// formatters print for the same responses (testdata/output, made by golden.py).
func TestFormattersMatchTheAWSCLI(t *testing.T) {
	for _, tc := range []struct{ file, op string }{
		{"describe-cluster", "DescribeCluster"}, {"list-clusters", "ListClusters"}, {"list-tags", "ListTags"},
	} {
		raw, err := os.ReadFile("testdata/output/" + tc.file + ".json")
		if err != nil {
			t.Fatal(err)
		}
		v, err := parseJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := printResult("json", tc.op, v, 80); got != string(raw) {
			t.Errorf("%s json differs from the AWS CLI's:\n%s", tc.file, got)
		}
		check := func(golden, got string) {
			want, err := os.ReadFile("testdata/output/" + golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the AWS CLI's:\n%s\nwant:\n%s", golden, got, want)
			}
		}
		check(tc.file+".table", printResult("table", tc.op, v, 80))
		check(tc.file+".text", printResult("text", tc.op, v, 80))
		if tc.file == "describe-cluster" {
			check(tc.file+".300.table", printResult("table", tc.op, v, 300))
		}
	}
}
