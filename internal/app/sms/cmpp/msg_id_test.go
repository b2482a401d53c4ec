package cmpp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

func TestMsgID(t *testing.T) {
	t.Parallel()
	parts := cmpp.MsgIDParts{Month: 3, Day: 2, Hour: 8, Minute: 30, Second: 15, Gateway: 1001, Seq: 7}
	require.Equal(t, parts, cmpp.MsgIDPartsAt(time.Date(2026, 3, 2, 8, 30, 15, 0, time.UTC), 1001, 7))
	id, err := parts.Pack()
	require.NoError(t, err)
	require.Equal(t, uint64(msgID7), id) // written by hand in the golden files
	require.Equal(t, parts, cmpp.ParseMsgID(id))

	top := cmpp.MsgIDParts{Month: 12, Day: 31, Hour: 23, Minute: 59, Second: 59, Gateway: cmpp.MaxMsgIDGateway, Seq: 0xffff}
	id, err = top.Pack()
	require.NoError(t, err)
	require.Equal(t, uint64(0xcfdfbeffffffffff), id)
	require.Equal(t, top, cmpp.ParseMsgID(id))

	for _, bad := range []cmpp.MsgIDParts{
		{Month: 0, Day: 1}, {Month: 13, Day: 1}, {Month: 1, Day: 0}, {Month: 1, Day: 32},
		{Month: 1, Day: 1, Hour: 24}, {Month: 1, Day: 1, Minute: 60}, {Month: 1, Day: 1, Second: 60},
		{Month: 1, Day: 1, Gateway: cmpp.MaxMsgIDGateway + 1},
	} {
		_, err := bad.Pack()
		require.ErrorIs(t, err, cmpp.ErrInvalid, "%+v", bad)
	}
}
