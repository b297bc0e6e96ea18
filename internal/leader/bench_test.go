package leader

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkFailover measures, on a real PostgreSQL, the time from the moment a leader's server
// can no longer reach the database (as after a SIGKILL: it never releases its lease) to the
// moment another server leads, with the default TTL and retry period (docs/reliability.md).
func BenchmarkFailover(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		ss := stores(b, "postgres", 2)
		a := &cuttable{Store: ss[0]}
		aLeads := make(chan struct{})
		go Run(context.Background(), Config{Store: a, Holder: fmt.Sprint("a", i)}, func(ctx context.Context) {
			close(aLeads)
			<-ctx.Done()
		})
		<-aLeads
		bLeads := make(chan time.Time, 1)
		bctx, bcancel := context.WithCancel(context.Background())
		go Run(bctx, Config{Store: ss[1], Holder: fmt.Sprint("b", i)}, func(ctx context.Context) {
			bLeads <- time.Now()
			<-ctx.Done()
		})
		time.Sleep(time.Duration(i%5) * 100 * time.Millisecond) // a cut at any point of the renewal cycle
		cut := time.Now()
		a.cut.Store(true)
		total += (<-bLeads).Sub(cut)
		bcancel()
		for _, s := range ss {
			s.Close()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}
