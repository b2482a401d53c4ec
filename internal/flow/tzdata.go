package flow

// Windows are evaluated in the node's IANA zone (seed 004 §13.3); a ship
// image without /usr/share/zoneinfo must still load it, so the zone database
// is embedded in every binary that imports flow (time.LoadLocation uses the
// system copy first).
import _ "time/tzdata"
