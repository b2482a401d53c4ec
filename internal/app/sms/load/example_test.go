package load_test

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/sms/load"
)

// Latencies answers nearest-rank percentiles over every recorded value.
func ExampleLatencies() {
	var l load.Latencies
	for _, ms := range []int{12, 3, 7, 40, 5, 9, 4, 6, 8, 10} {
		l.Add(time.Duration(ms) * time.Millisecond)
	}
	s := l.Summary()
	fmt.Println(s.P50, s.P95, s.P99, s.Max)
	// Output: 7ms 40ms 40ms 40ms
}
