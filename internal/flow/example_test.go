package flow_test

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/flow"
)

// Example_sendLoop shows one turn of a ship client's send loop: pick a batch,
// build it, meter its wire bytes, and wait for the link.
func Example_sendLoop() {
	oslo, _ := time.LoadLocation("Europe/Oslo")
	window, _ := flow.ParseWindow("Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00", oslo)
	now := time.Date(2026, 6, 2, 23, 0, 0, 0, oslo)    // a Tuesday night
	bucket := flow.NewTokenBucket(now, 16<<10, 64<<10) // 16 KiB/s, 64 KiB burst
	sched, _ := flow.NewScheduler(flow.SchedulerConfig[string]{
		BatchItems: 2,
		EligibleFunc: func(_ string, class flow.Class, at time.Time) bool {
			return class == flow.Critical || window.Open(at)
		},
	})
	sched.Push("position/0", flow.Bulk, "pos-1", now)
	sched.Push("position/0", flow.Bulk, "pos-2", now)
	sched.Push("alarm/0", flow.Critical, "fire-drill", now)

	for {
		b, ok := sched.Next(now)
		if !ok {
			break
		}
		wire := int64(48 << 10) // compressed size, known once the batch is built
		wait := bucket.Reserve(now, wire)
		fmt.Printf("%s %s %v after %s\n", b.Class, b.Lane, b.Items, wait)
	}
	fmt.Println("window closes at", window.NextChange(now).Format("Mon 15:04"))
	// Output:
	// CRITICAL alarm/0 [fire-drill] after 0s
	// BULK position/0 [pos-1 pos-2] after 2s
	// window closes at Wed 06:00
}
