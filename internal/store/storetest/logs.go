package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// testLogStore: streams by prefix (case-sensitive, wildcards literal), events in order and
// paged, an agent's batch stored once however often it is sent.
func testLogStore(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "logs")
	insertCluster(t, s, c)
	line := func(i int) []store.LogEvent {
		return []store.LogEvent{{Time: t0.Add(time.Duration(i) * time.Millisecond), Message: fmt.Sprintf("line %d", i)}}
	}
	write(t, s, func(tx store.Tx) error {
		for i, stream := range []string{"LifecycleConfig/gpu/i-1", "LifecycleConfig/gpu/i-2", "lifecycleconfig/x", "Lifecycle%/y"} {
			if err := tx.AppendLogEvents("/aws/sagemaker/Clusters/logs/x", stream, c.ID, line(i)); err != nil {
				return err
			}
		}
		for i := 0; i < 5; i++ {
			if err := tx.AppendLogEvents("/aws/sagemaker/Clusters/logs/x", "LifecycleConfig/gpu/i-1", c.ID, line(10+i)); err != nil {
				return err
			}
		}
		return nil
	})
	for _, again := range []bool{false, true} {
		write(t, s, func(tx store.Tx) error {
			stored, err := tx.AppendLogBatch("/aws/sagemaker/Clusters/logs/x", "agent", c.ID, "batch-1", line(99))
			if err == nil && stored == again {
				err = fmt.Errorf("batch sent again=%v: stored=%v", again, stored)
			}
			return err
		})
	}
	read(t, s, func(tx store.Tx) error {
		streams, err := tx.LogStreams("/aws/sagemaker/Clusters/logs/x", "LifecycleConfig/")
		if err != nil {
			return err
		}
		var names []string
		for _, st := range streams {
			names = append(names, st.Name)
		}
		if fmt.Sprint(names) != "[LifecycleConfig/gpu/i-1 LifecycleConfig/gpu/i-2]" {
			return fmt.Errorf("streams by prefix: %v", names)
		}
		all, err := tx.LogStreams("/aws/sagemaker/Clusters/logs/x", "")
		if err != nil || len(all) != 5 {
			return fmt.Errorf("every stream: %d, %v", len(all), err)
		}
		var msgs []string
		var after int64
		for {
			evs, err := tx.LogEvents("/aws/sagemaker/Clusters/logs/x", "LifecycleConfig/gpu/i-1", after, 4)
			if err != nil {
				return err
			}
			for _, e := range evs {
				msgs = append(msgs, e.Message)
				after = e.Seq
			}
			if len(evs) < 4 {
				break
			}
		}
		if fmt.Sprint(msgs) != "[line 0 line 10 line 11 line 12 line 13 line 14]" {
			return fmt.Errorf("events: %v", msgs)
		}
		batch, err := tx.LogEvents("/aws/sagemaker/Clusters/logs/x", "agent", 0, 10)
		if err == nil && len(batch) != 1 {
			err = fmt.Errorf("a batch sent twice is stored %d times", len(batch))
		}
		return err
	})
}
