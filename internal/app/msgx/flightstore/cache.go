package flightstore

import (
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

// Cache keeps flight states a single writer has loaded or saved, so that a
// LoadWith under PIPELINE_LOCK need not read the detail tables of a flight
// again when its row has not changed since.
//
// An entry is only ever used after checking it against the store: every
// Cache-backed LoadWith first reads the STATE_VERSION and xmin (the id of the
// transaction that wrote the row version) of each FLIGHT_SCHD row it needs,
// and an entry serves only when both equal the ones it was recorded with.
// Every writer of a flight rewrites its FLIGHT_SCHD row (Save upserts it even
// when only a collection changed; the history cleanup deletes it), so any
// write by anyone — another process, an operator, a transaction that rolled
// back after this one recorded its save — fails the check and the flight is
// read from the store. Within one transaction, two saves of a flight share
// the xmin but not the STATE_VERSION (it moves forward on every accepted
// change), and a Cache-backed SaveWith records the latest anyway.
//
// Entries are stored as the store would return them (times at microsecond
// precision, in UTC; empty collections nil) and handed out as deep copies, so
// a caller can neither see the difference between a hit and a read nor
// corrupt an entry. The cache holds at most its capacity of flights; past it,
// an arbitrary entry makes room. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cacheEntry
	hits    uint64
	misses  uint64
}

type cacheEntry struct {
	version int64
	xmin    int64
	state   *flight.State
}

// NewCache returns a cache of at most capacity flights (capacity ≥ 1).
func NewCache(capacity int) *Cache {
	return &Cache{max: max(capacity, 1), entries: make(map[string]cacheEntry)}
}

// CacheStats are a cache's counters since it was made.
type CacheStats struct {
	Flights      int    // entries held
	Hits, Misses uint64 // flights served from the cache / read from the store by LoadWith
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Flights: len(c.entries), Hits: c.hits, Misses: c.misses}
}

// get returns a copy of the entry of flid when it was recorded with version
// and xmin.
func (c *Cache) get(flid string, version, xmin int64) (*flight.State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[flid]
	if !ok || e.version != version || e.xmin != xmin {
		c.misses++
		return nil, false
	}
	c.hits++
	return e.state.Clone(), true
}

// put records s as the content of its FLIGHT_SCHD row version xmin.
func (c *Cache) put(s *flight.State, xmin int64) {
	e := cacheEntry{version: s.Version, xmin: xmin, state: stored(s)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[s.FLID]; !ok && len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[s.FLID] = e
}

// forget drops the entry of flid.
func (c *Cache) forget(flid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, flid)
}

// stored returns a deep copy of s as a load would return it: every time at
// the microsecond precision of timestamptz (pgx sends the instant floored to
// the microsecond) and in UTC, empty collections nil (Clone).
func stored(s *flight.State) *flight.State {
	c := s.Clone()
	for _, t := range []*time.Time{&c.CreatedAt, &c.UpdatedAt, &c.SODT, &c.EODT, &c.AODT} {
		*t = storedTime(*t)
	}
	for k := range c.Resources {
		for i := range c.Resources[k] {
			r := &c.Resources[k][i]
			r.Begin, r.End = storedTime(r.Begin), storedTime(r.End)
			r.ActualBegin, r.ActualEnd = storedTime(r.ActualBegin), storedTime(r.ActualEnd)
		}
	}
	for k := range c.Routes {
		for i := range c.Routes[k] {
			p := &c.Routes[k][i]
			p.SchedArr, p.SchedDep = storedTime(p.SchedArr), storedTime(p.SchedDep)
		}
	}
	return c
}

func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}
