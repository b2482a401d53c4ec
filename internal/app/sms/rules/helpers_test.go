package rules_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/rules"
)

// Ids of the test world.
const (
	entA, entB, entOff        = 1, 2, 3
	appA, appB, appOff, appEO = 10, 20, 30, 31 // appEO: active app of a suspended enterprise
	sigA, sigA2, sigB, sigOff = 100, 101, 200, 102
	chCM1, chCM2, chCU1       = 1000, 1001, 1002
	chCT1, chAll, chOff       = 1003, 1004, 1005
	grpCM, grpCU, grpCT       = 50, 51, 52
	grpSig                    = 53
)

var now = time.Date(2026, 12, 2, 1, 30, 0, 0, time.UTC) // 09:30 in China

// world returns the Data of a small but complete tenancy: two enterprises,
// three carriers, channels of each and one reaching all, routes with a
// signature-specific override, prices, a blacklist and frequency rules.
func world() rules.Data {
	return rules.Data{
		TakenAt:  now,
		Carriers: []rules.Carrier{{Code: "mobile", Name: "China Mobile"}, {Code: "unicom", Name: "China Unicom"}, {Code: "telecom", Name: "China Telecom"}},
		Segments: []rules.NumberSegment{
			{Prefix: "139", Carrier: "mobile"}, {Prefix: "138", Carrier: "mobile"},
			{Prefix: "130", Carrier: "unicom"}, {Prefix: "133", Carrier: "telecom"},
			{Prefix: "1390", Carrier: "unicom"}, // a longer prefix overrides its parent
		},
		Enterprises: []rules.Enterprise{{ID: entA, Name: "a", Active: true}, {ID: entB, Name: "b", Active: true}, {ID: entOff, Name: "off"}},
		Apps: []rules.App{
			{ID: appA, EnterpriseID: entA, Name: "otp", APIKey: "KEYA", Active: true, DailyLimit: 1000},
			{ID: appB, EnterpriseID: entB, Name: "notify", APIKey: "KEYB", Active: true},
			{ID: appOff, EnterpriseID: entA, Name: "old", APIKey: "KEYOFF"},
			{ID: appEO, EnterpriseID: entOff, Name: "x", APIKey: "KEYEO", Active: true},
		},
		Channels: []rules.Channel{
			{ID: chCM1, Name: "cm-1", Carrier: "mobile", SrcID: "1069001", Active: true, ConnState: rules.ConnConnected},
			{ID: chCM2, Name: "cm-2", Carrier: "mobile", SrcID: "1069002", Active: true, ConnState: rules.ConnDisconnected},
			{ID: chCU1, Name: "cu-1", Carrier: "unicom", SrcID: "1065501", Active: true, ConnState: rules.ConnConnected},
			{ID: chCT1, Name: "ct-1", Carrier: "telecom", SrcID: "1065901", Active: true, ConnState: rules.ConnConnected},
			{ID: chAll, Name: "all-1", SrcID: "1068801", Active: true, ConnState: rules.ConnConnected},
			{ID: chOff, Name: "off-1", Carrier: "mobile", SrcID: "1069009", ConnState: rules.ConnConnected},
		},
		Signatures: []rules.Signature{
			{ID: sigA, EnterpriseID: entA, Text: "云通科技", Active: true},
			{ID: sigA2, EnterpriseID: entA, Text: "云通商城", Active: true},
			{ID: sigOff, EnterpriseID: entA, Text: "旧签名", Active: false},
			{ID: sigB, EnterpriseID: entB, Text: "蓝鲸物流", Active: true},
		},
		Registrations: []rules.Registration{
			{SignatureID: sigA, ChannelID: chCM1, State: rules.RegApproved, ExtCode: "01"},
			{SignatureID: sigA, ChannelID: chCM2, State: rules.RegApproved, ExtCode: "02"},
			{SignatureID: sigA, ChannelID: chCU1, State: rules.RegPending},
			{SignatureID: sigA, ChannelID: chAll, State: rules.RegApproved},
			{SignatureID: sigA, ChannelID: chOff, State: rules.RegApproved},
			{SignatureID: sigA2, ChannelID: chAll, State: rules.RegApproved, ExtCode: "9"},
			{SignatureID: sigB, ChannelID: chCT1, State: rules.RegApproved},
		},
		Templates: []rules.Template{
			{ID: 1, EnterpriseID: entA, Code: "otp", Kind: "verification", Body: "您的验证码是${code}，${minutes}分钟内有效。", State: rules.TemplateApproved},
			{ID: 2, EnterpriseID: entA, Code: "promo", Kind: "marketing", Body: "新品上市", State: rules.TemplatePending},
			{ID: 3, EnterpriseID: entB, Code: "ship", Kind: "notification", Body: "Your parcel ${id} has shipped.", State: rules.TemplateApproved},
		},
		Blacklist: []rules.BlacklistEntry{{Number: "13800000000"}, {EnterpriseID: entA, Number: "13900001111"}},
		Groups: []rules.ChannelGroup{
			{ID: grpCM, Name: "cm", Members: []rules.GroupMember{{ChannelID: chOff, Priority: 0, Weight: 1}, {ChannelID: chCM2, Priority: 1, Weight: 1}, {ChannelID: chCM1, Priority: 1, Weight: 3}, {ChannelID: chAll, Priority: 2, Weight: 1}}},
			{ID: grpCU, Name: "cu", Members: []rules.GroupMember{{ChannelID: chCU1, Priority: 0, Weight: 1}}},
			{ID: grpCT, Name: "ct", Members: []rules.GroupMember{{ChannelID: chCT1, Priority: 0, Weight: 1}, {ChannelID: chCM1, Priority: 1, Weight: 1}}},
			{ID: grpSig, Name: "sig", Members: []rules.GroupMember{{ChannelID: chAll, Priority: 0, Weight: 1}}},
		},
		Routes: []rules.Route{
			{ID: 1, AppID: appA, Carrier: "mobile", GroupID: grpCM, Priority: 0},
			{ID: 2, AppID: appA, Carrier: "unicom", GroupID: grpCU, Priority: 0},
			{ID: 3, AppID: appA, Carrier: "mobile", SignatureID: sigA2, GroupID: grpSig, Priority: 0},
			{ID: 4, AppID: appB, Carrier: "telecom", GroupID: grpCT, Priority: 0},
			{ID: 5, AppID: appB, Carrier: "mobile", GroupID: grpCT, Priority: 0},
		},
		Prices: []rules.PriceRule{
			{AppID: appA, Carrier: "mobile", Unit: 45}, {AppID: appA, Carrier: "unicom", Unit: 45},
			{AppID: appB, Carrier: "telecom", Unit: 40}, {AppID: appB, Carrier: "mobile", Unit: 42},
		},
		Frequency: []rules.FrequencyRule{
			{AppID: appA, Window: time.Minute, Max: 1}, {AppID: appA, Window: time.Hour, Max: 5}, {AppID: appA, Window: 24 * time.Hour, Max: 10},
		},
	}
}

func snapshot(t *testing.T) *rules.Snapshot {
	t.Helper()
	s, err := rules.NewSnapshot(world())
	require.NoError(t, err)
	return s
}

// requireReason fails unless err is a refusal with reason want.
func requireReason(t *testing.T, err error, want rules.Reason, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.ErrorIs(t, err, rules.ErrRefused, msgAndArgs...)
	got, ok := rules.ReasonOf(err)
	require.True(t, ok, msgAndArgs...)
	require.Equal(t, want, got, append([]any{"error: %v"}, err)...)
}
