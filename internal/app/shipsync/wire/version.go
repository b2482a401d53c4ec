package wire

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Version is a protocol or event-format version, "MAJOR.MINOR". A major
// change is one a receiver of the old major cannot safely ignore; a minor
// change only adds optional fields, which older receivers skip (proto3 keeps
// unknown fields out of the way), so a newer minor of a supported major is
// accepted as is.
type Version struct {
	Major, Minor uint32
}

// String returns "MAJOR.MINOR".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// CurrentVersion is the version this code writes into protocol_version and
// schema_version.
var CurrentVersion = Version{Major: 1, Minor: 0}

// SupportedMajorsDefault lists the majors this code reads.
var SupportedMajorsDefault = []uint32{1}

// maxVersionLen bounds the text ParseVersion looks at.
const maxVersionLen = 21 // "4294967295.4294967295"

// ParseVersion parses "MAJOR.MINOR": two decimal numbers, each fitting in 32
// bits, without sign, spaces, leading zeros (other than "0" itself) or a
// third part. Anything else wraps ErrMalformedVersion; the error never
// quotes the input.
func ParseVersion(s string) (Version, error) {
	if s == "" {
		return Version{}, fmt.Errorf("%w: empty", ErrMalformedVersion)
	}
	if len(s) > maxVersionLen {
		return Version{}, fmt.Errorf("%w: %d bytes long", ErrMalformedVersion, len(s))
	}
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, fmt.Errorf("%w: not MAJOR.MINOR", ErrMalformedVersion)
	}
	major, err1 := parseVersionPart(maj)
	minor, err2 := parseVersionPart(min)
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("%w: not MAJOR.MINOR", ErrMalformedVersion)
	}
	return Version{Major: major, Minor: minor}, nil
}

func parseVersionPart(s string) (uint32, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, ErrMalformedVersion
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrMalformedVersion
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

// CheckVersion parses s and accepts it when its major is in supported (any
// minor). An unsupported major wraps ErrUnsupportedMajor and names the major
// (a number, never the raw text); a malformed s wraps ErrMalformedVersion.
func CheckVersion(s string, supported []uint32) (Version, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return Version{}, err
	}
	if !slices.Contains(supported, v.Major) {
		return v, fmt.Errorf("%w: major %d (supported %v)", ErrUnsupportedMajor, v.Major, supported)
	}
	return v, nil
}
