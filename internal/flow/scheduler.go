package flow

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Class is a rule's priority class (seed 004 §13.2). Lower values are more
// urgent.
type Class uint8

// The priority classes, most urgent first.
const (
	Critical Class = iota
	High
	Normal
	Bulk
)

// NumClasses is the number of priority classes; per-class arrays are indexed
// by Class.
const NumClasses = 4

var classNames = [NumClasses]string{"CRITICAL", "HIGH", "NORMAL", "BULK"}

// String returns the class's name as rules spell it: CRITICAL, HIGH, NORMAL,
// BULK.
func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ParseClass reads a class name, case-insensitively.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if strings.EqualFold(s, n) {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("flow: unknown priority class %q (want CRITICAL, HIGH, NORMAL or BULK)", s)
}

// WeightsDefault are the class weights of the weighted round robin when
// SchedulerConfig.Weights leaves a class at 0: under saturation CRITICAL,
// HIGH, NORMAL and BULK get 8:4:2:1 of the batches.
var WeightsDefault = [NumClasses]int{8, 4, 2, 1}

// MaxWaitDefault is the age after which a class's oldest waiting item raises
// the class's weight (ageing), when SchedulerConfig.MaxWait leaves it at 0.
// CRITICAL does not age: it has the top weight already.
var MaxWaitDefault = [NumClasses]time.Duration{0, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour}

// BatchItemsDefault is the most items Next returns in one batch when
// SchedulerConfig.BatchItems is 0.
const BatchItemsDefault = 500

// SchedulerConfig configures a Scheduler. The zero value is usable.
type SchedulerConfig[T any] struct {
	// Weights are the weighted-round-robin weights per class; a 0 takes
	// WeightsDefault; negative is invalid.
	Weights [NumClasses]int
	// MaxWait per class: once the class's oldest waiting item (among its
	// eligible lanes) is older than this, its weight is raised to AgedWeight
	// until that is no longer so. 0 takes MaxWaitDefault; negative never ages.
	MaxWait [NumClasses]time.Duration
	// AgedWeight is the weight of an aged class; 0 takes the largest of the
	// effective Weights. It is capped at CRITICAL's weight, so an aged class
	// gets at most an equal share with CRITICAL and never overtakes it.
	AgedWeight int
	// BatchItems is the most items of one batch (default BatchItemsDefault).
	BatchItems int
	// BatchBytes is the most bytes (by SizeFunc) of one batch; a batch always
	// holds at least one item, however big. 0 is no byte limit.
	BatchBytes int64
	// SizeFunc returns an item's size in bytes, for BatchBytes and
	// ClassStats.Bytes; nil counts every item as 0 bytes. It is called once,
	// in Push.
	SizeFunc func(T) int64
	// EligibleFunc says whether a lane may be served at now: a closed
	// transfer window, an untrusted clock pausing window-only BULK rules
	// (seed 004 §13.3), an outage. Ineligible lanes keep their items and take
	// no part in the round robin or ageing. nil: every lane is eligible. It
	// is called under the scheduler's lock and must not call back into it.
	EligibleFunc func(lane string, class Class, now time.Time) bool
}

func (c SchedulerConfig[T]) validate() error {
	for i, w := range c.Weights {
		if w < 0 {
			return fmt.Errorf("flow: scheduler: Weights[%s] is negative (%d)", Class(i), w)
		}
	}
	if c.AgedWeight < 0 {
		return fmt.Errorf("flow: scheduler: AgedWeight is negative (%d)", c.AgedWeight)
	}
	if c.BatchItems < 0 {
		return fmt.Errorf("flow: scheduler: BatchItems is negative (%d)", c.BatchItems)
	}
	if c.BatchBytes < 0 {
		return fmt.Errorf("flow: scheduler: BatchBytes is negative (%d)", c.BatchBytes)
	}
	return nil
}

// Batch is what Next hands out: items of one lane, oldest first.
type Batch[T any] struct {
	Lane  string
	Class Class
	Items []T
	// Bytes is the sum of the items' SizeFunc sizes.
	Bytes int64
	// Aged reports that the class was served at its raised (aged) weight.
	Aged bool
}

// ClassStats are one class's counts, for metrics and the backlog view.
type ClassStats struct {
	Items int
	Bytes int64
	Lanes int
	// Oldest is the earliest enqueue time among the lanes' first items
	// (zero when the class is empty).
	Oldest time.Time
}

// Scheduler orders the items waiting to be sent (seed 004 §13.2). Items are
// pushed into lanes; a lane is one rule and source partition and is FIFO,
// which keeps same-key order. A lane belongs to one class. Next serves:
//
//   - across classes, smooth weighted round robin among the classes that have
//     an eligible lane, by weight (default 8/4/2/1), so under saturation each
//     class gets its weight's share of batches and a CRITICAL item pushed
//     behind any BULK backlog goes out within the next batch or two;
//   - ageing: a class whose oldest eligible item has waited longer than its
//     MaxWait is weighted AgedWeight (by default the top weight) until it
//     catches up, so a low class is not left behind for long under permanent
//     high-class load;
//   - within a class, round robin over its eligible lanes, one batch of up to
//     BatchItems (and BatchBytes) of a single lane per Next, since a batch is
//     grouped by rule and partition and one bad lane must not block others.
//
// Safe for concurrent use.
type Scheduler[T any] struct {
	mu      sync.Mutex
	cfg     SchedulerConfig[T]
	weights [NumClasses]int
	maxWait [NumClasses]time.Duration
	aged    int
	classes [NumClasses]classQueue[T]
	items   int
}

type classQueue[T any] struct {
	ring    []*lane[T] // round-robin order
	next    int        // ring index served next
	byName  map[string]*lane[T]
	items   int
	bytes   int64
	current int // smooth weighted round robin credit
}

type lane[T any] struct {
	name  string
	queue []queued[T]
	head  int
}

type queued[T any] struct {
	item T
	at   time.Time
	size int64
}

// NewScheduler returns an empty scheduler, or an error naming the bad field.
func NewScheduler[T any](cfg SchedulerConfig[T]) (*Scheduler[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler[T]{cfg: cfg}
	for c := range NumClasses {
		s.weights[c] = cfg.Weights[c]
		if s.weights[c] == 0 {
			s.weights[c] = WeightsDefault[c]
		}
		s.aged = max(s.aged, s.weights[c])
		s.maxWait[c] = cfg.MaxWait[c]
		if s.maxWait[c] == 0 {
			s.maxWait[c] = MaxWaitDefault[c]
		}
		s.classes[c].byName = map[string]*lane[T]{}
	}
	if cfg.AgedWeight > 0 {
		s.aged = cfg.AgedWeight
	}
	s.aged = min(s.aged, s.weights[Critical])
	if s.cfg.BatchItems == 0 {
		s.cfg.BatchItems = BatchItemsDefault
	}
	return s, nil
}

// Push appends item to the end of lane in class, enqueued at enqueuedAt (the
// time ageing counts from). Lanes are told apart by class and name together.
// Push panics on a class outside Critical..Bulk, a programming error: rule
// configuration is checked with ParseClass.
func (s *Scheduler[T]) Push(laneName string, class Class, item T, enqueuedAt time.Time) {
	if int(class) >= NumClasses {
		panic(fmt.Sprintf("flow: scheduler: push to invalid class %d", class))
	}
	var size int64
	if s.cfg.SizeFunc != nil {
		size = s.cfg.SizeFunc(item)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cq := &s.classes[class]
	l := cq.lane(laneName)
	l.queue = append(l.queue, queued[T]{item: item, at: enqueuedAt, size: size})
	cq.items++
	cq.bytes += size
	s.items++
}

// lane returns the class's lane named name, adding it at the end of the
// round robin when it has none. The caller holds the scheduler's mu.
func (cq *classQueue[T]) lane(name string) *lane[T] {
	l := cq.byName[name]
	if l == nil {
		l = &lane[T]{name: name}
		cq.byName[name] = l
		cq.ring = append(cq.ring, l)
	}
	return l
}

// Requeue puts items back at the head of lane in class, in their order,
// ahead of everything pushed since: a batch that could not be sent, or the
// part of it to send again, keeps its place in the lane's FIFO order.
// enqueuedAt is the time ageing counts from (the items' original one, so a
// requeued item does not look younger than it is).
func (s *Scheduler[T]) Requeue(laneName string, class Class, items []T, enqueuedAt time.Time) {
	if int(class) >= NumClasses {
		panic(fmt.Sprintf("flow: scheduler: requeue to invalid class %d", class))
	}
	if len(items) == 0 {
		return
	}
	qs := make([]queued[T], len(items))
	var bytes int64
	for i, it := range items {
		qs[i] = queued[T]{item: it, at: enqueuedAt}
		if s.cfg.SizeFunc != nil {
			qs[i].size = s.cfg.SizeFunc(it)
		}
		bytes += qs[i].size
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cq := &s.classes[class]
	l := cq.lane(laneName)
	l.queue = append(qs, l.queue[l.head:]...)
	l.head = 0
	cq.items += len(items)
	cq.bytes += bytes
	s.items += len(items)
}

// Next returns the next batch to send at now and true, or false when no
// eligible lane has an item. See Scheduler for the order.
func (s *Scheduler[T]) Next(now time.Time) (Batch[T], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		eff      [NumClasses]int
		aged     [NumClasses]bool
		eligible [NumClasses][]bool
		total    int
	)
	for c := range NumClasses {
		cq := &s.classes[c]
		if cq.items == 0 {
			cq.current = 0
			continue
		}
		var oldest time.Time
		ok := make([]bool, len(cq.ring))
		some := false
		for i, l := range cq.ring {
			if s.cfg.EligibleFunc != nil && !s.cfg.EligibleFunc(l.name, Class(c), now) {
				continue
			}
			ok[i], some = true, true
			if at := l.queue[l.head].at; oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		if !some {
			cq.current = 0 // no credit hoarded while shut out
			continue
		}
		eligible[c] = ok
		eff[c] = s.weights[c]
		if s.maxWait[c] > 0 && now.Sub(oldest) > s.maxWait[c] && s.aged > eff[c] {
			eff[c], aged[c] = s.aged, true
		}
		total += eff[c]
	}
	if total == 0 {
		return Batch[T]{}, false
	}
	pick := -1
	for c := range NumClasses {
		if eligible[c] == nil {
			continue
		}
		s.classes[c].current += eff[c]
		if pick < 0 || s.classes[c].current > s.classes[pick].current {
			pick = c
		}
	}
	cq := &s.classes[pick]
	cq.current -= total
	b := Batch[T]{Class: Class(pick), Aged: aged[pick]}
	ok := eligible[pick]
	n := len(cq.ring)
	for k := range n {
		i := (cq.next + k) % n
		if !ok[i] {
			continue
		}
		l := cq.ring[i]
		b.Lane = l.name
		s.take(cq, l, &b)
		if l.head == len(l.queue) {
			delete(cq.byName, l.name)
			cq.ring = append(cq.ring[:i], cq.ring[i+1:]...)
			cq.next = i // the lane after it moved into i
		} else {
			cq.next = i + 1
		}
		if len(cq.ring) > 0 {
			cq.next %= len(cq.ring)
		} else {
			cq.next = 0
		}
		break
	}
	return b, true
}

// take moves up to BatchItems/BatchBytes items of l into b. The caller holds mu.
func (s *Scheduler[T]) take(cq *classQueue[T], l *lane[T], b *Batch[T]) {
	var zero queued[T]
	for l.head < len(l.queue) && len(b.Items) < s.cfg.BatchItems {
		q := l.queue[l.head]
		if s.cfg.BatchBytes > 0 && len(b.Items) > 0 && b.Bytes+q.size > s.cfg.BatchBytes {
			break
		}
		b.Items = append(b.Items, q.item)
		b.Bytes += q.size
		l.queue[l.head] = zero // let the item be collected
		l.head++
	}
	cq.items -= len(b.Items)
	cq.bytes -= b.Bytes
	s.items -= len(b.Items)
	// Compact once the consumed prefix dominates, so a long-lived lane does
	// not keep its whole history.
	if l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0
	} else if l.head >= 1024 && l.head*2 >= len(l.queue) {
		l.queue = append(l.queue[:0], l.queue[l.head:]...)
		l.head = 0
	}
}

// Len returns the number of items waiting, eligible or not.
func (s *Scheduler[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.items
}

// Stats returns per-class counts, indexed by Class.
func (s *Scheduler[T]) Stats() [NumClasses]ClassStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [NumClasses]ClassStats
	for c := range NumClasses {
		cq := &s.classes[c]
		st := ClassStats{Items: cq.items, Bytes: cq.bytes, Lanes: len(cq.ring)}
		for _, l := range cq.ring {
			if at := l.queue[l.head].at; st.Oldest.IsZero() || at.Before(st.Oldest) {
				st.Oldest = at
			}
		}
		out[c] = st
	}
	return out
}
