package snapshot_test

import (
	"fmt"

	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
)

// A record changed three times from the pinned position on (r0 → r1 → r2
// → r3, at offsets 10, 11, 12) was read by the snapshot at r2: the first
// two changes are already in its snapshot row and are skipped; the third
// is replayed, and so is everything after it.
func ExampleCovered() {
	from := int64(-1)
	for _, c := range []struct {
		base, result string
		off          int64
	}{{"r0", "r1", 10}, {"r1", "r2", 11}, {"r2", "r3", 12}} {
		var covered bool
		covered, from = snapshot.Covered("r2", c.base, c.result, c.off, from)
		fmt.Printf("%s → %s at %d: covered %v\n", c.base, c.result, c.off, covered)
	}
	// Output:
	// r0 → r1 at 10: covered true
	// r1 → r2 at 11: covered true
	// r2 → r3 at 12: covered false
}
