package cmpp_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

func TestFrameReaderStream(t *testing.T) {
	t.Parallel()
	var stream []byte
	files := []string{"submit_v30.hex", "active_test.hex", "deliver_v30.hex", "terminate_resp.hex"}
	for _, f := range files {
		stream = append(stream, readHex(t, f)...)
	}
	fr := cmpp.NewFrameReader(bytes.NewReader(stream))
	for _, f := range files {
		want := readHex(t, f)
		h, body, err := fr.Next()
		require.NoError(t, err, f)
		require.Equal(t, uint32(len(want)), h.TotalLength)
		require.Equal(t, want[cmpp.HeaderLen:], body)
	}
	_, _, err := fr.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestFrameReaderTruncated(t *testing.T) {
	t.Parallel()
	b := readHex(t, "submit_v30.hex")
	_, _, err := cmpp.NewFrameReader(bytes.NewReader(b[:5])).Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	h, _, err := cmpp.NewFrameReader(bytes.NewReader(b[:50])).Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, cmpp.CmdSubmit, h.CommandID)
	_, _, err = cmpp.NewFrameReader(bytes.NewReader(b[:cmpp.HeaderLen])).Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func TestFrameReaderRefusesLengthBeforeReading(t *testing.T) {
	t.Parallel()
	for _, total := range []uint32{0, 11, cmpp.MaxPacket + 1, 0xffffffff} {
		hdr := cmpp.Header{TotalLength: total, CommandID: cmpp.CmdDeliver, SequenceID: 1}.AppendTo(nil)
		src := &countingReader{r: io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 1<<16)))}
		h, body, err := cmpp.NewFrameReader(src).Next()
		require.Error(t, err)
		require.True(t, errorIsAny(err, cmpp.ErrMalformed, cmpp.ErrTooLong), "%v", err)
		require.Nil(t, body)
		require.Equal(t, total, h.TotalLength)
		require.Equal(t, cmpp.HeaderLen, src.read, "nothing past the header is read")
	}
}

func TestFrameReaderReusesBody(t *testing.T) { // not parallel: AllocsPerRun
	one := readHex(t, "deliver_v30.hex")
	fr := cmpp.NewFrameReader(bytes.NewReader(bytes.Repeat(one, 100)))
	_, _, err := fr.Next()
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(50, func() {
		if _, _, err := fr.Next(); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func errorIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
