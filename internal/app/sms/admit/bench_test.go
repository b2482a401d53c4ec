package admit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/tenancy"
)

// BenchmarkStage measures stage A alone: 2,000 requests (one number each,
// distinct numbers, the otp template) are accepted through the API first,
// then timed while the stage's engine (defaults: 2 workers, TxBatch 32)
// admits them all; it reports messages per second.
//
//	go test -run '^$' -bench BenchmarkStage -benchtime 3x ./internal/app/sms/admit/
func BenchmarkStage(b *testing.B) {
	const n = 2000
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		bd := setup(b, func(f *tenancy.Fixture) { f.Enterprises[0].Balance = 10_000_000 })
		for j := range n {
			req := otp(fmt.Sprintf("b-%d-%d", i, j), fmt.Sprintf("1381%07d", j))
			status, out := bd.send("yuntong/notify", req)
			require.Equal(b, 202, status, out)
		}
		b.StartTimer()
		start := time.Now()
		done := 0
		for done < n {
			k, err := bd.engine.Work(bd.ctx)
			require.NoError(b, err)
			done += k
		}
		total += time.Since(start)
		b.StopTimer()
		require.Zero(b, bd.scalar(`SELECT count(*) FROM sms_message WHERE state <> 'admitted'`))
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
}
