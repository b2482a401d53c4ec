package rules_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/rules"
)

func TestNormalizeNumber(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
	}{
		{"13912345678", "13912345678"},
		{"+8613912345678", "13912345678"},
		{"+86 139-1234-5678", "13912345678"},
		{"008613912345678", "13912345678"},
		{"8613912345678", "13912345678"},
		{" 139 1234 5678 ", "13912345678"},
		{"19912345678", "19912345678"},
	} {
		got, err := rules.NormalizeNumber(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, in := range []string{
		"", "1391234567", "139123456789", "12912345678", "23912345678", "+8513912345678", "+86139123456789",
		"13912345678x", "139.1234.5678", "++8613912345678", "86+13912345678", "0086139123456", "+13912345678",
		"１３９１２３４５６７８", strings.Repeat("1", 40), "8612912345678",
	} {
		_, err := rules.NormalizeNumber(in)
		requireReason(t, err, rules.ReasonBadNumber, in)
		if len(in) >= 11 {
			require.NotContains(t, err.Error(), in[:11], "the error quotes the input")
		}
	}
}

func TestSegments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		text string
		want int
	}{
		{"ascii one", strings.Repeat("a", 160), 1},
		{"ascii two", strings.Repeat("a", 161), 2},
		{"ascii escapes count two", strings.Repeat("{", 80), 1},
		{"ascii escapes over", strings.Repeat("{", 81), 2},
		{"ascii three", strings.Repeat("a", 153*2+1), 3},
		{"ucs2 one", strings.Repeat("中", 70), 1},
		{"ucs2 two", strings.Repeat("中", 71), 2},
		{"ucs2 exactly two", strings.Repeat("中", 134), 2},
		{"ucs2 three", strings.Repeat("中", 135), 3},
		{"emoji pairs", strings.Repeat("😀", 35), 1},
		{"emoji over", strings.Repeat("😀", 36), 2},
		{"ucs2 max", strings.Repeat("中", rules.MaxContentChars), 10},
	} {
		got, err := rules.Segments(c.text, rules.Coding(c.text))
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
		// the count is the splitter's: what is priced is what is sent
		segs, err := cmpp.Split(c.text, rules.Coding(c.text), cmpp.SplitOpts{RefFunc: func() uint16 { return 7 }})
		require.NoError(t, err)
		require.Len(t, segs, got, c.name)
	}
	_, err := rules.Segments(strings.Repeat("中", rules.MaxContentChars+1), cmpp.FmtUCS2)
	requireReason(t, err, rules.ReasonContentTooLong)
	_, err = rules.Segments("中文", cmpp.FmtASCII)
	requireReason(t, err, rules.ReasonContentEncoding)
}

func TestPrice(t *testing.T) {
	t.Parallel()
	p, err := rules.Price(3, 45)
	require.NoError(t, err)
	require.Equal(t, rules.Money(135), p)
	require.Equal(t, "0.135 CNY", p.String())
	require.Equal(t, "0.045 CNY", rules.Money(45).String())
	require.Equal(t, "12.000 CNY", rules.Money(12000).String())
	require.Equal(t, "-1.005 CNY", rules.Money(-1005).String())
	for _, c := range []struct {
		segs int
		unit rules.Money
	}{{0, 45}, {1, 0}, {-1, 45}, {2, 1 << 62}} {
		_, err := rules.Price(c.segs, c.unit)
		require.Error(t, err, "%d × %d", c.segs, c.unit)
	}
}

func TestSplitSignature(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, sig, body string
	}{
		{"【云通科技】您的验证码是1234", "云通科技", "您的验证码是1234"},
		{"您的验证码是1234【云通科技】", "云通科技", "您的验证码是1234"},
		{"  【云通科技】 hi  ", "云通科技", "hi"},
		{"【云通科技】hi【云通科技】", "云通科技", "hi"},
		{"【云通科技】", "云通科技", ""},
		{"【云通科技】a【b】c", "云通科技", "a【b】c"},
		{"【AB】x", "AB", "x"},
		{"【云通科技】see x】", "云通科技", "see x】"},
	} {
		sig, body, err := rules.SplitSignature(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.sig, sig, c.in)
		require.Equal(t, c.body, body, c.in)
	}
	for _, c := range []struct {
		in   string
		want rules.Reason
	}{
		{"您的验证码是1234", rules.ReasonSignatureMissing},
		{"", rules.ReasonSignatureMissing},
		{"[云通科技]hi", rules.ReasonSignatureMissing},
		{"hi【云通科技】there", rules.ReasonSignatureMissing},
		{"【云通科技】hi【蓝鲸物流】", rules.ReasonSignatureInvalid},
		{"【A】hi", rules.ReasonSignatureInvalid},
		{"【" + strings.Repeat("长", 21) + "】hi", rules.ReasonSignatureInvalid},
		{"【云通 科技】hi", rules.ReasonSignatureInvalid},
		{"【【云通】hi", rules.ReasonSignatureInvalid},
		{"【】hi", rules.ReasonSignatureMissing},
	} {
		_, _, err := rules.SplitSignature(c.in)
		requireReason(t, err, c.want, c.in)
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	got, err := rules.Render("您的验证码是${code}，${minutes}分钟内有效。${code}", map[string]string{"code": "4821", "minutes": "5"})
	require.NoError(t, err)
	require.Equal(t, "您的验证码是4821，5分钟内有效。4821", got)
	got, err = rules.Render("no placeholders, $ and { alone", nil)
	require.NoError(t, err)
	require.Equal(t, "no placeholders, $ and { alone", got)
	// a value is not scanned again
	got, err = rules.Render("${a}${b}", map[string]string{"a": "$", "b": "{b}"})
	require.NoError(t, err)
	require.Equal(t, "${b}", got)

	tooMany := map[string]string{}
	for i := range rules.MaxParams + 1 {
		tooMany[fmt.Sprintf("p%d", i)] = "x"
	}
	for _, c := range []struct {
		name   string
		body   string
		params map[string]string
		want   rules.Reason
	}{
		{"missing", "code ${code}", nil, rules.ReasonTemplateParam},
		{"unused", "hello", map[string]string{"code": "1"}, rules.ReasonTemplateParam},
		{"too long", "${a}", map[string]string{"a": strings.Repeat("x", rules.MaxParamChars+1)}, rules.ReasonTemplateParam},
		{"empty value", "${a}", map[string]string{"a": ""}, rules.ReasonTemplateParam},
		{"signature injection", "${a}", map[string]string{"a": "【假冒】"}, rules.ReasonTemplateParam},
		{"placeholder injection", "${a}", map[string]string{"a": "${a}"}, rules.ReasonTemplateParam},
		{"control", "${a}", map[string]string{"a": "x\ny"}, rules.ReasonTemplateParam},
		{"bad utf8", "${a}", map[string]string{"a": "\xff"}, rules.ReasonTemplateParam},
		{"bad name", "${a}", map[string]string{"a": "1", "b-c": "2"}, rules.ReasonTemplateParam},
		{"too many", "x", tooMany, rules.ReasonTemplateParam},
		{"unclosed", "code ${code", map[string]string{"code": "1"}, rules.ReasonTemplateMalformed},
		{"empty name", "code ${}", nil, rules.ReasonTemplateMalformed},
		{"bad placeholder", "code ${co de}", nil, rules.ReasonTemplateMalformed},
		{"long body", strings.Repeat("长", rules.MaxTemplateChars+1), nil, rules.ReasonTemplateMalformed},
	} {
		_, err := rules.Render(c.body, c.params)
		requireReason(t, err, c.want, c.name)
		for _, v := range c.params {
			if len(v) > 3 {
				require.NotContains(t, err.Error(), v, "%s: the error quotes a value", c.name)
			}
		}
	}
}

func TestSnapshotLookups(t *testing.T) {
	t.Parallel()
	s := snapshot(t)
	for number, want := range map[string]string{"13912345678": "mobile", "13901234567": "unicom", "13012345678": "unicom", "13312345678": "telecom"} {
		got, err := s.CarrierOf(number)
		require.NoError(t, err, number)
		require.Equal(t, want, got, number)
	}
	_, err := s.CarrierOf("15912345678")
	requireReason(t, err, rules.ReasonUnknownCarrier)

	require.True(t, s.Blacklisted(entA, "13800000000"), "platform list")
	require.True(t, s.Blacklisted(entB, "13800000000"), "platform list")
	require.True(t, s.Blacklisted(entA, "13900001111"), "own list")
	require.False(t, s.Blacklisted(entB, "13900001111"), "another enterprise's list")
	require.False(t, s.Blacklisted(entA, "13912345678"))

	_, err = s.ActiveApp(appOff)
	requireReason(t, err, rules.ReasonAppInactive)
	_, err = s.ActiveApp(999)
	requireReason(t, err, rules.ReasonAppInactive)
	_, err = s.ActiveApp(appEO)
	requireReason(t, err, rules.ReasonEnterpriseInactive)
	require.Equal(t, int64(appA), s.AppByKey("KEYA").ID)

	_, err = s.Signature(entA, "蓝鲸物流")
	requireReason(t, err, rules.ReasonSignatureUnknown, "another enterprise's")
	_, err = s.Signature(entA, "旧签名")
	requireReason(t, err, rules.ReasonSignatureUnknown, "disabled")
	_, err = s.Template(entA, "promo")
	requireReason(t, err, rules.ReasonTemplateNotApproved)
	_, err = s.Template(entA, "ship")
	requireReason(t, err, rules.ReasonTemplateUnknown, "another enterprise's")
	_, err = s.UnitPrice(appA, "telecom")
	requireReason(t, err, rules.ReasonNoPrice)
}

func TestNewSnapshotRefusesBrokenReferences(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*rules.Data){
		"app of unknown enterprise":  func(d *rules.Data) { d.Apps[0].EnterpriseID = 99 },
		"segment of unknown carrier": func(d *rules.Data) { d.Segments[0].Carrier = "x" },
		"member unknown channel":     func(d *rules.Data) { d.Groups[0].Members[0].ChannelID = 99 },
		"route unknown group":        func(d *rules.Data) { d.Routes[0].GroupID = 99 },
		"route foreign signature":    func(d *rules.Data) { d.Routes[0].SignatureID = sigB },
		"price unknown app":          func(d *rules.Data) { d.Prices[0].AppID = 99 },
	} {
		d := world()
		mod(&d)
		_, err := rules.NewSnapshot(d)
		require.Error(t, err, name)
	}
}

func channels(cs []rules.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Channel)
	}
	return out
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	s := snapshot(t)
	// inactive cm-off skipped; priority 1: cm-1 (weight 3) before cm-2; then all-1
	cs, err := s.Candidates(appA, "mobile", sigA, rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, []string{"cm-1", "cm-2", "all-1"}, channels(cs))
	require.Equal(t, "106900101", cs[0].SrcID, "SrcID with the extension code")

	cs, err = s.Candidates(appA, "mobile", sigA, rules.RouteOpts{RequireConnected: true})
	require.NoError(t, err)
	require.Equal(t, []string{"cm-1", "all-1"}, channels(cs))

	// a signature-specific route replaces the catch-all
	cs, err = s.Candidates(appA, "mobile", sigA2, rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, []string{"all-1"}, channels(cs))

	// unicom: the only channel has the signature pending
	_, err = s.Candidates(appA, "unicom", sigA, rules.RouteOpts{})
	requireReason(t, err, rules.ReasonNoChannel)
	require.Contains(t, err.Error(), "1 signature not approved")

	_, err = s.Candidates(appA, "telecom", sigA, rules.RouteOpts{})
	requireReason(t, err, rules.ReasonNoRoute)

	// appB to mobile goes through group ct: ct-1 is telecom-only, cm-1 lacks
	// sigB's registration
	_, err = s.Candidates(appB, "mobile", sigB, rules.RouteOpts{})
	requireReason(t, err, rules.ReasonNoChannel)
	require.Contains(t, err.Error(), "1 of another carrier, 1 signature not approved")
}

func TestPick(t *testing.T) {
	t.Parallel()
	require.Equal(t, -1, rules.Pick(nil, 1))
	cs := []rules.Candidate{{Channel: "a", Priority: 1, Weight: 3}, {Channel: "b", Priority: 1, Weight: 1}, {Channel: "c", Priority: 2, Weight: 100}}
	counts := map[int]int{}
	for key := range uint64(4000) {
		i := rules.Pick(cs, key)
		require.Equal(t, i, rules.Pick(cs, key), "deterministic")
		counts[i]++
	}
	require.Zero(t, counts[2], "the second tier is never picked")
	require.InDelta(t, 3000, counts[0], 200)
	require.InDelta(t, 1000, counts[1], 200)
}

func TestLimitKeys(t *testing.T) {
	t.Parallel()
	// 2026-12-02 23:59:30 in China is 15:59:30 UTC
	at := time.Date(2026, 12, 2, 15, 59, 30, 0, time.UTC)
	k, ok := rules.DailyKey(appA, 1000, at)
	require.True(t, ok)
	require.Equal(t, "daily:10:20261202", k.Key)
	require.Equal(t, 1000, k.Max)
	require.Equal(t, time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC), k.Until.UTC())
	k2, _ := rules.DailyKey(appA, 1000, at.Add(time.Minute))
	require.Equal(t, "daily:10:20261203", k2.Key, "midnight in China starts a new day")
	_, ok = rules.DailyKey(appA, 0, at)
	require.False(t, ok)

	frs := []rules.FrequencyRule{{Window: time.Minute, Max: 1}, {Window: 24 * time.Hour, Max: 10}, {Window: 0, Max: 3}}
	keys := rules.FrequencyKeys(appA, "13912345678", frs, at)
	require.Len(t, keys, 2, "a zero window is ignored")
	require.Equal(t, fmt.Sprintf("freq:10:60:%d:13912345678", at.Truncate(time.Minute).Unix()), keys[0].Key)
	dayStart := time.Date(2026, 12, 2, 0, 0, 0, 0, rules.ChinaTime)
	require.Equal(t, fmt.Sprintf("freq:10:86400:%d:13912345678", dayStart.Unix()), keys[1].Key)
	require.Equal(t, dayStart.Add(24*time.Hour).UTC(), keys[1].Until)
	// stable within the window, new in the next
	same := rules.FrequencyKeys(appA, "13912345678", frs, at.Add(20*time.Second))
	require.Equal(t, keys[0].Key, same[0].Key)
	next := rules.FrequencyKeys(appA, "13912345678", frs, at.Add(31*time.Second))
	require.NotEqual(t, keys[0].Key, next[0].Key)
	require.NotEqual(t, keys[1].Key, next[1].Key, "the day window turns at midnight in China")
}

func TestCheck(t *testing.T) {
	t.Parallel()
	s := snapshot(t)
	p, err := s.Check(rules.Request{AppID: appA, Number: "+86 139-1234-5678", SignName: "云通科技", TemplateCode: "otp",
		Params: map[string]string{"code": "4821", "minutes": "5"}}, now, rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, "13912345678", p.Number)
	require.Equal(t, "mobile", p.Carrier)
	require.Equal(t, "【云通科技】您的验证码是4821，5分钟内有效。", p.Text)
	require.Equal(t, cmpp.FmtUCS2, p.MsgFmt)
	require.Equal(t, 1, p.Segments)
	require.Equal(t, rules.Money(45), p.Amount)
	require.Equal(t, []string{"cm-1", "cm-2", "all-1"}, channels(p.Candidates))
	require.Len(t, p.Limits, 4, "daily + three frequency rules")
	require.Equal(t, "daily:10:20261202", p.Limits[0].Key)

	// a long message is priced per segment
	long := "【云通科技】" + strings.Repeat("长", 100)
	p, err = s.Check(rules.Request{AppID: appA, Number: "13912345678", Content: long}, now, rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, 2, p.Segments)
	require.Equal(t, rules.Money(90), p.Amount)
	// a signature at the end is moved to the front
	p, err = s.Check(rules.Request{AppID: appA, Number: "13912345678", Content: "hello【云通科技】"}, now, rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, "【云通科技】hello", p.Text)

	ok := rules.Request{AppID: appA, Number: "13912345678", Content: "【云通科技】hello"}
	for _, c := range []struct {
		name string
		mod  func(*rules.Request)
		want rules.Reason
	}{
		{"app suspended", func(r *rules.Request) { r.AppID = appOff }, rules.ReasonAppInactive},
		{"enterprise suspended", func(r *rules.Request) { r.AppID = appEO }, rules.ReasonEnterpriseInactive},
		{"bad number", func(r *rules.Request) { r.Number = "12345" }, rules.ReasonBadNumber},
		{"no segment", func(r *rules.Request) { r.Number = "15912345678" }, rules.ReasonUnknownCarrier},
		{"platform blacklist", func(r *rules.Request) { r.Number = "13800000000" }, rules.ReasonBlacklisted},
		{"own blacklist", func(r *rules.Request) { r.Number = "13900001111" }, rules.ReasonBlacklisted},
		{"no signature", func(r *rules.Request) { r.Content = "hello" }, rules.ReasonSignatureMissing},
		{"foreign signature", func(r *rules.Request) { r.Content = "【蓝鲸物流】hello" }, rules.ReasonSignatureUnknown},
		{"named other signature", func(r *rules.Request) { r.SignName = "云通商城" }, rules.ReasonSignatureInvalid},
		{"empty body", func(r *rules.Request) { r.Content = "【云通科技】" }, rules.ReasonContentEmpty},
		{"nothing", func(r *rules.Request) { r.Content = "" }, rules.ReasonContentEmpty},
		{"too long", func(r *rules.Request) { r.Content = "【云通科技】" + strings.Repeat("长", 700) }, rules.ReasonContentTooLong},
		{"template unknown", func(r *rules.Request) { r.TemplateCode = "nope" }, rules.ReasonTemplateUnknown},
		{"template pending", func(r *rules.Request) { r.TemplateCode = "promo"; r.SignName = "云通科技" }, rules.ReasonTemplateNotApproved},
		{"template without signature", func(r *rules.Request) {
			r.TemplateCode, r.Params = "otp", map[string]string{"code": "1", "minutes": "5"}
		}, rules.ReasonSignatureMissing},
		{"template param missing", func(r *rules.Request) {
			r.TemplateCode, r.SignName, r.Params = "otp", "云通科技", map[string]string{"code": "1"}
		}, rules.ReasonTemplateParam},
		{"no price", func(r *rules.Request) { r.Number = "13312345678" }, rules.ReasonNoPrice},
		{"no channel", func(r *rules.Request) { r.Number = "13012345678" }, rules.ReasonNoChannel},
	} {
		req := ok
		c.mod(&req)
		_, err := s.Check(req, now, rules.RouteOpts{})
		requireReason(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "1391234", "%s: the error quotes the number", c.name)
		require.NotContains(t, err.Error(), "hello", "%s: the error quotes the content", c.name)
	}
}

func TestReasons(t *testing.T) {
	t.Parallel()
	seen := map[rules.Reason]bool{}
	for _, r := range rules.Reasons {
		require.False(t, seen[r], "duplicate %s", r)
		seen[r] = true
		require.Regexp(t, `^[a-z_]+$`, string(r))
		st := r.Status()
		require.True(t, st >= 400 && st < 600, "%s → %d", r, st)
	}
	require.Equal(t, http.StatusTooManyRequests, rules.ReasonFrequencyLimit.Status())
	require.Equal(t, http.StatusPaymentRequired, rules.ReasonInsufficientBalance.Status())
	require.Equal(t, http.StatusForbidden, rules.ReasonBlacklisted.Status())
	require.Equal(t, http.StatusUnprocessableEntity, rules.ReasonBadNumber.Status())

	err := fmt.Errorf("stage a: %w", &rules.Error{Reason: rules.ReasonNoRoute, Detail: strings.Repeat("x", 500)})
	r, ok := rules.ReasonOf(err)
	require.True(t, ok)
	require.Equal(t, rules.ReasonNoRoute, r)
	require.Less(t, len(err.Error()), 250, "detail bounded")
	_, ok = rules.ReasonOf(errors.New("other"))
	require.False(t, ok)
}
