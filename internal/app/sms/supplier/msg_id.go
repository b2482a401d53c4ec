package supplier

import (
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// reserveAhead is how far past the current second the allocator reserves
// Msg_Id seconds in the record at a time: one record line per minute of ids
// at most, and a restart skips at most this much ahead of the clock.
const reserveAhead = time.Minute

// msgIDs allocates Msg_Ids in the standard layout (month, day, hour,
// minute, second, ISMG code, 16-bit sequence). Ids are unique for the
// server's life and, with a record, across restarts, within a year (the
// layout has no year):
//
//   - The time part is a virtual second that never goes back: the clock's
//     second, or the last one used if that is later. When a second's 65,536
//     sequence numbers are used up the virtual second moves on, so a burst
//     above 65,536 ids a second runs ahead of the clock rather than repeat.
//   - A block of n ids (a Submit to n numbers) stays inside one second, so
//     that Msg_Id … Msg_Id+n−1 never carries into the ISMG code.
//   - Before it uses a second past the reserved one, it reserves up to
//     reserveAhead further in the record (an "ids" line, synced like a
//     Submit's). A restarted server starts past the last reservation.
//
// Safe for concurrent use.
type msgIDs struct {
	mu       sync.Mutex
	code     uint32
	loc      *time.Location
	sec      int64 // virtual second (Unix) of the last id
	next     int   // next sequence number in sec (0…65536)
	reserved int64 // ids may use seconds below this without writing (0: no record)
	reserve  func(until int64) error
}

// newMsgIDs returns an allocator whose first id is not earlier than second
// from (Unix). reserve persists a reservation; nil without a record.
func newMsgIDs(code uint32, loc *time.Location, from int64, reserve func(until int64) error) *msgIDs {
	return &msgIDs{code: code, loc: loc, sec: from - 1, next: 1 << 16, reserve: reserve, reserved: from}
}

// alloc returns the first of n consecutive Msg_Ids (1 ≤ n ≤ 99) issued at now.
func (m *msgIDs) alloc(now time.Time, n int) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sec := now.Unix()
	if sec <= m.sec {
		sec = m.sec
		if m.next+n > 1<<16 {
			sec++
		}
	}
	if sec != m.sec {
		m.next = 0
	}
	if m.reserve != nil && sec >= m.reserved {
		until := sec + int64(reserveAhead/time.Second)
		if err := m.reserve(until); err != nil {
			return 0, err
		}
		m.reserved = until
	}
	m.sec = sec
	seq := m.next
	m.next += n
	id, err := cmpp.MsgIDPartsAt(time.Unix(sec, 0).In(m.loc), m.code, uint16(seq)).Pack()
	return id, err
}
