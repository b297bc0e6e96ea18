package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeInput feeds arbitrary bodies to the request decoder of every operation. It must never
// panic, must answer only SerializationException or ValidationException, and whatever it accepts
// must survive a round trip: encoding the decoded input and decoding it again gives the same
// value. The seed corpus is in testdata/fuzz/FuzzDecodeInput (real CreateCluster documents and
// hand-made edge cases); CI runs it for a few seconds with -fuzz.
func FuzzDecodeInput(f *testing.F) {
	f.Add("CreateCluster", []byte(`{"ClusterName":"x","InstanceGroups":[{"InstanceGroupName":"g","InstanceCount":1,"ExecutionRole":"arn:aws:iam::111122223333:role/R","InstanceType":"ml.c5.xlarge"}]}`))
	f.Add("ListClusters", []byte(`{"CreationTimeAfter": 1.7e9, "MaxResults": 10, "SortBy": "NAME"}`))
	f.Add("UpdateCluster", []byte(`{"ClusterName":"x","InstanceGroupsToDelete":["a","b"]}`))
	f.Fuzz(func(t *testing.T, opName string, body []byte) {
		op := LookupOperation(opName)
		if op == nil {
			op = Operations[len(opName)%len(Operations)]
		}
		in, err := DecodeInput(op, body)
		if err != nil {
			if !IsCode(err, CodeSerializationException) && !IsCode(err, CodeValidationException) {
				t.Fatalf("%s: unexpected error kind %v", op.Name, err)
			}
			return
		}
		if c, ok := in.(*CreateClusterRequest); ok {
			CheckCreateCluster(c) // must not panic
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("%s: re-encode: %v", op.Name, err)
		}
		in2, err := DecodeInput(op, again)
		if err != nil {
			t.Fatalf("%s: accepted %q but not its re-encoding %q: %v", op.Name, body, again, err)
		}
		if !reflect.DeepEqual(in, in2) {
			t.Fatalf("%s: round trip changed the input:\n%s\n%s", op.Name, body, again)
		}
	})
}
