package sisxml

// Presence says whether an element was carried and whether it was empty.
// seed 000 §12.1: an absent element is "not carried" (merge keeps the current
// value); an explicitly empty one (<GATE/>, <FLNO></FLNO>) is a clear.
type Presence uint8

const (
	// Absent: the element was not in the message; the field is not carried.
	Absent Presence = iota
	// Empty: the element was present with no (or only whitespace) content, or a
	// collection element with no ITEM children; the field is cleared.
	Empty
	// Set: the element carried a value (or a collection at least one ITEM).
	Set
)

// String returns "absent", "empty" or "set".
func (p Presence) String() string {
	switch p {
	case Absent:
		return "absent"
	case Empty:
		return "empty"
	case Set:
		return "set"
	}
	return "invalid"
}

// Field is a presence-aware scalar. Value is meaningful only when Presence is
// Set; for Absent and Empty it is the zero value.
type Field[T any] struct {
	Presence Presence
	Value    T
}

// Val returns a Set field holding v.
func Val[T any](v T) Field[T] { return Field[T]{Presence: Set, Value: v} }

// Cleared returns an Empty (explicitly cleared) field.
func Cleared[T any]() Field[T] { return Field[T]{Presence: Empty} }

// Carried reports whether the element was present (Empty or Set).
func (f Field[T]) Carried() bool { return f.Presence != Absent }

// List is a presence-aware collection (a resource collection, a route, SRVT,
// VIPF). Absent: not carried; Empty: the collection element was present
// without ITEM children — clear the collection; Set: replace the collection
// with Items, in document order (the ORDINAL order, seed 000 §11.3).
type List[T any] struct {
	Presence Presence
	Items    []T
}

// Items returns a Set list holding items, or an Empty list when there are none.
func Items[T any](items ...T) List[T] {
	if len(items) == 0 {
		return List[T]{Presence: Empty}
	}
	return List[T]{Presence: Set, Items: items}
}

// Carried reports whether the collection element was present (Empty or Set).
func (l List[T]) Carried() bool { return l.Presence != Absent }
