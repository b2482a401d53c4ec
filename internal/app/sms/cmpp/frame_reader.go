package cmpp

import (
	"errors"
	"fmt"
	"io"
)

// FrameReader reads whole packets off a byte stream (a TCP connection,
// preferably behind a bufio.Reader). It checks Total_Length against
// HeaderLen and MaxPacket before it reads or allocates anything for the
// body, and reuses one body buffer, so it allocates at most MaxPacket bytes
// over its life. Not safe for concurrent use; one goroutine reads a
// connection.
type FrameReader struct {
	r    io.Reader
	hdr  [HeaderLen]byte
	body []byte
}

// NewFrameReader returns a FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader { return &FrameReader{r: r} }

// Next reads one packet and returns its header and body. The body is valid
// until the next call. Errors: io.EOF when the stream ends cleanly between
// packets; io.ErrUnexpectedEOF when it ends inside one; ErrMalformed or
// ErrTooLong (from ParseHeader, with the header) for a Total_Length out of
// bounds — the stream is out of step after any error and the connection
// should be closed. An unknown Command_Id is not an error here (see
// NewPacket).
func (fr *FrameReader) Next() (Header, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := ParseHeader(fr.hdr[:])
	if err != nil {
		return h, nil, err
	}
	n := int(h.TotalLength) - HeaderLen
	if cap(fr.body) < n {
		fr.body = make([]byte, n)
	}
	fr.body = fr.body[:n]
	if _, err := io.ReadFull(fr.r, fr.body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, fmt.Errorf("cmpp: read %s seq=%d body of %d bytes: %w", h.CommandID, h.SequenceID, n, err)
	}
	return h, fr.body, nil
}
