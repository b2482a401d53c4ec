// Package simulate is an AODB simulator for msgx (seed 000): it generates a
// realistic operating day of SIS XML messages — the daily plan as SCHD-DNLD
// packages, FLOP dynamic changes of every subtype, FDEL deletions with
// master/shared cascades, SCHD-ADFT ad-hoc flights, re-sent duplicates,
// malformed, ignored and PROTOCOL-rejected messages — writes them into the
// real CMINMSGS mailbox table (with rolled-back inserts that leave permanent
// holes in the id sequence and inserts that commit late, seed 000 §4.1), and
// keeps its own model of the expected result: each committed row's expected
// PROCFLAG and each flight's expected final state.
//
// The model (Model) is deliberately independent of the flight package's
// decision code: it is a small restatement of the merge rules (seed 000
// §11–§12, docs/msgx/sis-xml.md §5) that an end-to-end test compares the
// pipeline's actual flight states against (Model.Compare) and the mailbox
// marks against (Written.CheckMarks).
//
// A typical run:
//
//	plan := simulate.NewPlan(simulate.Options{Seed: 1})
//	_ = simulate.CreateMailbox(ctx, mailbox)
//	written, err := plan.Write(ctx, mailbox, 0, nil)
//	// ... run the pipeline until every row in written.Rows is marked ...
//	diffs, err := written.CheckMarks(ctx, mailbox)   // PROCFLAG per row
//	diffs = plan.Model().Compare(actualStates)       // final flight states
package simulate
