package flight_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

func TestDocument(t *testing.T) {
	t.Parallel()
	shanghai := zone(t, "Asia/Shanghai")
	master := &flight.State{
		FLID: "100001", Status: flight.Active, Version: 4, OperationDay: "20260301", LastMsgID: 42,
		CreatedAt: created, UpdatedAt: time.Date(2026, 3, 1, 9, 2, 3, 999, shanghai),
		FLNO: "CA1234", ADID: "D", SODT: wall("20260301093000"), STAT: "SCH",
	}
	master.Resources[flight.GATE] = []flight.Resource{res(1, "B12"), {Code: "B12", ActualBegin: wall("20260301085500")}}
	master.Delays = []flight.Delay{{Code: "WX", Minutes: ptr(15)}}
	master.Routes[flight.ROUT] = []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "PEK", SchedDep: wall("20260301093000")}}
	master.Routes[flight.ERUT] = []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "CAN"}}
	master.Services[flight.VIPF] = []flight.Service{{Code: "VIP", Quantity: ptr(1), Remark: `a "b" <c>`}}
	c1 := &flight.State{FLID: "100002", Status: flight.Active, FLNO: "MU5678", MAID: "100001", CSOP: "MU", CSFT: "MU5678"}
	c2 := &flight.State{FLID: "100003", Status: flight.Active, MAID: "100001"}

	want := `{"FLID":"100001","STATE":"ACTIVE","STATE_VERSION":4,"OPERATION_DAY":"20260301","LAST_MSG_ID":42,` +
		`"CREATED_AT":"2026-02-28T10:00:00Z","UPDATED_AT":"2026-03-01T01:02:03Z",` +
		`"FLNO":"CA1234","AWCD":null,"ADID":"D","FLTY":null,"SODT":"2026-03-01T09:30:00Z","EODT":null,"AODT":null,` +
		`"ACTY":null,"ACRG":null,"TERM":null,"STAT":"SCH","ABST":null,"ABRS":null,"MAID":null,"CSOP":null,"CSFT":null,` +
		`"MAFL":[{"FLID":"100002","FLNO":"MU5678"},{"FLID":"100003","FLNO":null}],` +
		`"GATE":[{"ORDINAL":1,"SOURCE_SEQ":1,"CODE":"B12","BTIM":null,"ETIM":null,"ABTM":null,"AETM":null},` +
		`{"ORDINAL":2,"SOURCE_SEQ":null,"CODE":"B12","BTIM":null,"ETIM":null,"ABTM":"2026-03-01T08:55:00Z","AETM":null}],` +
		`"CKIC":[],"BELT":[],"STND":[],"CHUT":[],"BRDG":[],"CHOK":[],` +
		`"DELY":[{"ORDINAL":1,"SOURCE_SEQ":null,"CODE":"WX","DURA":15,"RMRK":null}],` +
		`"ROUT":[{"ORDINAL":1,"SOURCE_SEQ":1,"APCD":"PEK","SARR":null,"SDEP":"2026-03-01T09:30:00Z"}],` +
		`"ERUT":[{"ORDINAL":1,"SOURCE_SEQ":1,"APCD":"CAN","SARR":null,"SDEP":null}],` +
		`"SRVT":[],"VIPF":[{"ORDINAL":1,"SOURCE_SEQ":null,"CODE":"VIP","QNTY":1,"RMRK":"a \"b\" <c>"}]}`

	t.Run("SIS times in the message zone", func(t *testing.T) {
		t.Parallel()
		// The wall clocks are read in the zone and written with its offset;
		// CREATED_AT and UPDATED_AT are instants and stay in UTC.
		got := string(flight.Document(master, []*flight.State{c1, c2}, shanghai))
		inZone := strings.NewReplacer(`"SODT":"2026-03-01T09:30:00Z"`, `"SODT":"2026-03-01T09:30:00+08:00"`,
			`"ABTM":"2026-03-01T08:55:00Z"`, `"ABTM":"2026-03-01T08:55:00+08:00"`,
			`"SDEP":"2026-03-01T09:30:00Z"`, `"SDEP":"2026-03-01T09:30:00+08:00"`).Replace(want)
		require.NotEqual(t, want, inZone)
		require.Equal(t, inZone, got)
		require.Contains(t, got, `"UPDATED_AT":"2026-03-01T01:02:03Z"`)
	})

	t.Run("master with MAFL", func(t *testing.T) {
		t.Parallel()
		got := flight.Document(master, []*flight.State{c1, c2}, time.UTC)
		require.Equal(t, want, string(got))
		require.True(t, json.Valid(got))
	})
	t.Run("byte-stable whatever the children order and the zone", func(t *testing.T) {
		t.Parallel()
		again := master.Clone()
		again.UpdatedAt = again.UpdatedAt.UTC()
		require.Equal(t, want, string(flight.Document(again, []*flight.State{c2, c1}, time.UTC)))
	})
	t.Run("master without children has an empty MAFL", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, string(flight.Document(&flight.State{FLID: "9", Status: flight.Active, Version: 2}, nil, time.UTC)), `"CSFT":null,"MAFL":[],"GATE":[]`)
	})
	t.Run("shared flight has no MAFL, children ignored", func(t *testing.T) {
		t.Parallel()
		got := string(flight.Document(c1, []*flight.State{c2}, time.UTC))
		require.NotContains(t, got, "MAFL")
		require.Contains(t, got, `"MAID":"100001","CSOP":"MU","CSFT":"MU5678","GATE":[]`)
		require.Contains(t, got, `"OPERATION_DAY":null,"LAST_MSG_ID":0,"CREATED_AT":null,"UPDATED_AT":null`)
	})
	t.Run("children from Children", func(t *testing.T) {
		t.Parallel()
		states := snapOf(master, c1, c2, &flight.State{FLID: "100004", Status: flight.Deleted, MAID: "100001"})
		require.Equal(t, want, string(flight.Document(master, flight.Children(master, states), time.UTC)))
	})
}

func TestNoticeDocument(t *testing.T) {
	t.Parallel()
	msg := flight.Msg{ID: 42, Kind: "FLOP-GATE", Now: time.Date(2026, 3, 1, 1, 2, 3, 500, time.UTC)}
	tests := []struct {
		name   string
		notice flight.Notice
		want   string
	}{
		{
			name:   "update",
			notice: flight.Notice{FLID: "100001", Version: 5, Action: flight.ActionUpdate, Cause: "FLOP-GATE", Fields: []string{"GATE", "MAFL"}},
			want:   `{"FLID":"100001","STATE_VERSION":5,"ACTION":"UPDATE","CAUSE":"FLOP-GATE","FIELDS":["GATE","MAFL"],"MSG_ID":42,"UPDATED_AT":"2026-03-01T01:02:03Z"}`,
		},
		{
			name:   "no fields is an empty array",
			notice: flight.Notice{FLID: "1", Version: 1, Action: flight.ActionDelete, Cause: "FDEL-DELE"},
			want:   `{"FLID":"1","STATE_VERSION":1,"ACTION":"DELETE","CAUSE":"FDEL-DELE","FIELDS":[],"MSG_ID":42,"UPDATED_AT":"2026-03-01T01:02:03Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, string(flight.NoticeDocument(tt.notice, msg)))
			require.Equal(t, tt.want, string(flight.NoticeDocument(tt.notice, msg)))
		})
	}
}
