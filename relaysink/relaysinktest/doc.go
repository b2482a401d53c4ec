// Package relaysinktest is the sink conformance suite: one Run that every
// relaysink.Sink implementation passes (relaykafka on kfake, relayredis,
// relaynats and relaywebhook on real servers), so all sinks keep the one
// contract of relaysink.Sink:
//
//   - events of one key reach the broker in Seq order (after dedupe by ID,
//     the first occurrences of a key are Seq 1, 2, 3 …);
//   - a large batch is confirmed in one Publish call;
//   - the dedupe ID, Seq, Type and the user headers are carried with each
//     event, and a tombstone arrives as a null value;
//   - under injected broker failures every event is eventually confirmed by
//     re-publishing the unconfirmed ones the way the dispatcher does, and every
//     Publish result keeps the per-key confirmed-prefix rule (checked per
//     topic and key: a key's Seq runs per destination);
//   - Publish against a broker that does not answer returns errors by its ctx
//     deadline instead of hanging, and by the sink's own timeout when ctx has
//     none (relaysink.ErrPublishTimeout);
//   - an event that breaks the relaysink.Event contract fails with
//     relaysink.ErrInvalidEvent and blocks only its own key;
//   - Publish after Close fails every event with relaysink.ErrClosed, and
//     Close is idempotent;
//   - every error is a *relaysink.PublishError naming its event, and after a
//     key's first unconfirmed event every later one wraps
//     relaysink.ErrEarlierFailed (RequireResult, checked on every Publish).
//
// The failures are checked with errors.Is against the relaysink sentinels,
// so a caller's errors.Is holds whatever sink produced the error.
//
// Each case is a parallel subtest with its own topics. The suite knows no
// backend: a Harness builds the sink and reads back what reached the broker,
// and Features switches off what a sink cannot do (a skipped case says so).
package relaysinktest
