// Package flow is the engine's flow control for weak, metered links (seed 004
// §13, DESIGN §2 item 9), used by the ship sync client's scheduler:
//
//   - TokenBucket meters compressed wire bytes: a long-run rate and a burst,
//     reserve-then-wait so a batch's size can be counted once it is built, a
//     batch bigger than the burst goes after a wait (debt) instead of never,
//     and SetRate changes the rate without handing out a fresh burst.
//   - Scheduler orders waiting items: priority classes CRITICAL, HIGH,
//     NORMAL, BULK served by weighted round robin (8/4/2/1), ageing that
//     raises a class left waiting past its max wait, lanes (rule + source
//     partition) served round robin within a class and FIFO inside, batches
//     of one lane.
//   - Window is a weekly set of transfer windows in an IANA time zone
//     ("Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00"), DST-aware: Open,
//     NextChange, OpenDuration.
//   - TrustedClock detects wall-clock jumps against a monotonic elapsed
//     time; while jumped, window-only BULK rules pause until a server time
//     re-anchors it.
//
// Nothing here reads the time: every method takes the time (or a
// relaytype.Clock) from the caller, so tests drive it with relayclock.Fake.
// The package embeds the IANA time zone database (time/tzdata, about 450 KB)
// so that time.LoadLocation works on a ship node built into a distroless or
// scratch image without /usr/share/zoneinfo; the system database still wins
// when it is present. See docs/flow.md.
package flow
