package flight

import "time"

// Status is a flight's lifecycle state in FLIGHT_SCHD.STATE.
type Status string

const (
	// Active: the flight exists (created by SCHD, ADFT or a FLOP on an unknown FLID).
	Active Status = "ACTIVE"
	// Deleted: business-deleted by FDEL (seed 000 §12.3). The row and its details
	// are kept; only the lifecycle cleanup removes it physically.
	Deleted Status = "DELETED"
)

// State is the full current state of one flight instance: the FLIGHT_SCHD row
// and all its detail rows (seed 000 §11.1). It is what the domain decides on
// and what a store loads and saves as one unit.
//
// Conventions: an empty string and a zero time.Time mean NULL; a nil *int
// means NULL; an empty collection is nil (never an empty non-nil slice), so
// two equal states compare equal with reflect.DeepEqual. Collections are in
// ORDINAL order (the first item is ORDINAL 1, seed 000 §11.3).
type State struct {
	// FLID is the flight instance's unique id, the primary key. Never inferred
	// from flight number, date or resources (seed 000 §11).
	FLID string
	// Status is ACTIVE or DELETED.
	Status Status
	// Version is STATE_VERSION: 1 when the flight is created, +1 on every
	// accepted change (seed 000 §12.1 INV-13). Consumers use it (with FLID and
	// UpdatedAt) to drop stale states.
	Version int64
	// OperationDay is OPERATION_DAY, YYYYMMDD, derived from SODT by the airport
	// zone and day-cut settings; "" (NULL) until a SCHD or ADFT record with a
	// SODT fixes it, then immutable (seed 000 §11.2 INV-12).
	OperationDay string
	// LastMsgID is the mailbox id (CMINMSGS.ID) of the last message that changed
	// the flight (tracing).
	LastMsgID int64
	// CreatedAt and UpdatedAt are the processing clock's times of creation and
	// of the last accepted change.
	CreatedAt time.Time
	UpdatedAt time.Time

	// Base fields (FLOP-BASE).
	FLNO string
	AWCD string
	ADID string
	FLTY string
	SODT time.Time
	EODT time.Time
	AODT time.Time
	ACTY string
	ACRG string
	TERM string

	// Status fields (FLOP-STAT).
	STAT string
	ABST string
	ABRS string

	// Master/shared (FLOP-SHAR, seed 000 §11.4). MAID is the fact: the FLID of
	// the master flight for a shared flight, "" for a master or an ordinary
	// flight. MAFL is never stored; see Children/Projection.
	MAID string
	CSOP string
	CSFT string

	// Resource collections, indexed by ResourceKind (one detail table each).
	Resources [NumResourceKinds][]Resource
	// Delays (FLIGHT_DELY).
	Delays []Delay
	// Routes, indexed by RouteKind: ROUT and ERUT are independent collections
	// stored in FLIGHT_ROUTE_POINT with ROUTE_KIND (seed 000 §11.3).
	Routes [NumRouteKinds][]RoutePoint
	// Services, indexed by ServiceKind: SRVT and VIPF (G-SRVT-VIPF), one detail
	// table each.
	Services [NumServiceKinds][]Service
}

// ResourceKind indexes State.Resources.
type ResourceKind int

const (
	GATE ResourceKind = iota // boarding gates
	CKIC                     // check-in counters
	BELT                     // baggage belts
	STND                     // stands
	CHUT                     // baggage chutes
	BRDG                     // boarding bridges (dock / undock)
	CHOK                     // chocks on / off
	NumResourceKinds
)

// String returns the SIS element name (GATE, CKIC …).
func (k ResourceKind) String() string {
	return [...]string{"GATE", "CKIC", "BELT", "STND", "CHUT", "BRDG", "CHOK"}[k]
}

// RouteKind indexes State.Routes and is FLIGHT_ROUTE_POINT.ROUTE_KIND.
type RouteKind int

const (
	ROUT RouteKind = iota // route
	ERUT                  // extra route, independent of ROUT
	NumRouteKinds
)

// String returns "ROUT" or "ERUT".
func (k RouteKind) String() string { return [...]string{"ROUT", "ERUT"}[k] }

// ServiceKind indexes State.Services.
type ServiceKind int

const (
	SRVT ServiceKind = iota // services
	VIPF                    // VIP services
	NumServiceKinds
)

// String returns "SRVT" or "VIPF".
func (k ServiceKind) String() string { return [...]string{"SRVT", "VIPF"}[k] }

// Resource is one allocation (one detail row). Two items with the same Code
// are two allocations: never de-duplicated by code (seed 000 §11.3).
type Resource struct {
	SourceSeq   *int      // SOURCE_SEQ: upstream SEQU, may be NULL or repeat
	Code        string    // resource code
	Begin       time.Time // planned begin (BTIM)
	End         time.Time // planned end (ETIM)
	ActualBegin time.Time // actual begin (ABTM)
	ActualEnd   time.Time // actual end (AETM)
}

// Delay is one delay record.
type Delay struct {
	SourceSeq *int
	Code      string // delay reason code
	Minutes   *int   // DURA
	Remark    string // RMRK
}

// RoutePoint is one route point.
type RoutePoint struct {
	SourceSeq *int
	Airport   string    // APCD
	SchedArr  time.Time // SARR
	SchedDep  time.Time // SDEP
}

// Service is one SRVT or VIPF item.
type Service struct {
	SourceSeq *int
	Code      string
	Quantity  *int // QNTY
	Remark    string
}

// Clone returns a deep copy of s (nil for nil), so a decision can build the
// next state without touching the current one.
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := *s
	for k := range c.Resources {
		c.Resources[k] = cloneSlice(s.Resources[k])
	}
	c.Delays = cloneSlice(s.Delays)
	for k := range c.Routes {
		c.Routes[k] = cloneSlice(s.Routes[k])
	}
	for k := range c.Services {
		c.Services[k] = cloneSlice(s.Services[k])
	}
	return &c
}

// cloneSlice copies items (pointer fields are immutable by convention and
// shared). An empty input yields nil.
func cloneSlice[T any](items []T) []T {
	if len(items) == 0 {
		return nil
	}
	return append([]T(nil), items...)
}
