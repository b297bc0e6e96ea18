package agentproto

import (
	"reflect"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/health"
)

// Every field of a health finding that crosses the wire comes back as it went; the fields
// that stay on the node are named here. A field added to health.Finding fails this test until
// the conversion carries it or it is added to stays.
func TestFindingRoundTrip(t *testing.T) {
	stays := map[string]bool{"Time": true, "Uptime": true, "Repeat": true}
	in := health.Finding{}
	v := reflect.ValueOf(&in).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v" + v.Type().Field(i).Name)
		case reflect.Int:
			f.SetInt(int64(i + 1))
		}
	}
	out := NewFinding(in, "kernel-log", time.UnixMilli(1234)).Health()
	ov := reflect.ValueOf(out)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if stays[name] {
			continue
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), ov.Field(i).Interface()) {
			t.Errorf("%s: sent %v, received %v", name, v.Field(i).Interface(), ov.Field(i).Interface())
		}
	}
}
