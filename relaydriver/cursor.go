package relaydriver

import "time"

// CursorSaveParams saves a watermark.
type CursorSaveParams struct {
	Queue     string
	Watermark int64
	HoleSince time.Time // zero: NULL
	Now       time.Time
}

// CursorSeedParams seeds a watermark at cutover.
type CursorSeedParams struct {
	Queue     string
	Watermark int64
	Mode      string
	Now       time.Time
}
