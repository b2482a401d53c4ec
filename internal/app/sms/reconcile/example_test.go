package reconcile_test

import (
	"os"

	"github.com/relayhq/relay/internal/app/sms/reconcile"
)

// A report as Run returns it prints as a table; a failed rule is a line
// marked ✗ with its count and a few example ids.
func ExampleReport_Write() {
	rep := &reconcile.Report{Checks: []*reconcile.Check{
		{Name: reconcile.CheckLost, Result: reconcile.Pass, Figures: []string{"messages: 4 (completed 3, refused 1)"}},
		{Name: reconcile.CheckSubmits, Result: reconcile.Fail,
			Figures:  []string{"supplier records: 1 files, 10 accepted submits, 9 distinct submitIds"},
			Failures: []string{"1 submitIds were accepted by a supplier more than once (submitIds) (e.g. 257)"}},
	}}
	_ = rep.Write(os.Stdout)
	// Output:
	// CHECK                RESULT  FIGURES
	// no-message-lost      pass    messages: 4 (completed 3, refused 1)
	// submits-and-retries  FAIL    supplier records: 1 files, 10 accepted submits, 9 distinct submitIds
	//                              ✗ 1 submitIds were accepted by a supplier more than once (submitIds) (e.g. 257)
	// reconcile: FAILED: submits-and-retries
}
