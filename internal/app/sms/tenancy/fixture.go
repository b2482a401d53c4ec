package tenancy

import (
	"strconv"
	"time"

	"github.com/relayhq/relay/internal/app/sms/rules"
)

// DemoPrice is the fixture's price of one segment: 0.045 CNY. It is
// positive on purpose: a zero price skips the billing path and hides its
// account lock in any measurement.
const DemoPrice rules.Money = 45

// DemoChannelBasePort is the first loopback port of the fixture's channels
// (cm-a 7891 … ct-b 7896), where `relay sms supplier` instances may listen.
const DemoChannelBasePort = 7891

// DemoChannels are the names of the fixture's six supplier accounts, two
// per carrier: the first of each pair speaks CMPP 3.0, the second 2.0.
var DemoChannels = []string{"cm-a", "cm-b", "cu-a", "cu-b", "ct-a", "ct-b"}

// DemoFixture is a realistic tenancy for trying the send chain: three
// carriers with their real number segments, six supplier accounts (two per
// carrier, on 127.0.0.1:7891–7896, CMPP 3.0 and 2.0), a channel group per
// carrier and one for marketing, two enterprises with signatures
// registered per channel (one pending, one rejected, to exercise the
// route skips), templates, blacklists, three apps with prices of 0.045 CNY
// per segment, frequency limits and routes, and opening balances of 500 and
// 200 CNY. secretRef gives each channel's secret reference ("file:/path");
// the secrets themselves are the caller's business.
func DemoFixture(secretRef func(channel string) string) Fixture {
	ch := func(name, supplier, carrier, version, spID, srcID string, port int) FixtureChannel {
		mode := "per_segment"
		if version == "2.0" {
			mode = "message_level"
		}
		return FixtureChannel{Name: name, Supplier: supplier, Carrier: carrier, Address: "127.0.0.1:" + strconv.Itoa(port),
			Version: version, SPID: spID, SecretRef: secretRef(name), SrcID: srcID, Connections: 2, Window: 16,
			RateLimit: 200, ReceiptMode: mode}
	}
	all := func(state rules.RegState, ext string, except map[string]rules.RegState) []FixtureRegistration {
		var out []FixtureRegistration
		for _, c := range DemoChannels {
			st := state
			if s, ok := except[c]; ok {
				st = s
			}
			out = append(out, FixtureRegistration{Channel: c, State: st, ExtCode: ext})
		}
		return out
	}
	routes := func() []FixtureRoute {
		return []FixtureRoute{
			{Carrier: "mobile", Group: "mobile-main"},
			{Carrier: "unicom", Group: "unicom-main"},
			{Carrier: "telecom", Group: "telecom-main"},
		}
	}
	prices := func(p rules.Money) map[string]rules.Money {
		return map[string]rules.Money{"mobile": p, "unicom": p, "telecom": p}
	}
	otpRoutes := append(routes(), FixtureRoute{Carrier: "mobile", Signature: "云通商城", Group: "mobile-marketing"})
	return Fixture{
		Carriers: []FixtureCarrier{
			{Code: "mobile", Name: "China Mobile", Prefixes: []string{"134", "135", "136", "137", "138", "139", "147",
				"150", "151", "152", "157", "158", "159", "178", "182", "183", "184", "187", "188", "198"}},
			{Code: "unicom", Name: "China Unicom", Prefixes: []string{"130", "131", "132", "145", "155", "156", "166",
				"175", "176", "185", "186"}},
			{Code: "telecom", Name: "China Telecom", Prefixes: []string{"133", "153", "173", "177", "180", "181", "189",
				"191", "199"}},
		},
		Channels: []FixtureChannel{
			ch("cm-a", "huaxin", "mobile", "3.0", "901001", "10690001", DemoChannelBasePort),
			ch("cm-b", "yunlian", "mobile", "2.0", "901002", "10690002", DemoChannelBasePort+1),
			ch("cu-a", "huaxin", "unicom", "3.0", "901003", "10655001", DemoChannelBasePort+2),
			ch("cu-b", "yunlian", "unicom", "2.0", "901004", "10655002", DemoChannelBasePort+3),
			ch("ct-a", "huaxin", "telecom", "3.0", "901005", "10659001", DemoChannelBasePort+4),
			ch("ct-b", "yunlian", "telecom", "2.0", "901006", "10659002", DemoChannelBasePort+5),
		},
		Groups: []FixtureGroup{
			{Name: "mobile-main", Members: []FixtureMember{{Channel: "cm-a", Priority: 0, Weight: 3}, {Channel: "cm-b", Priority: 0, Weight: 1}}},
			{Name: "unicom-main", Members: []FixtureMember{{Channel: "cu-a", Priority: 0, Weight: 1}, {Channel: "cu-b", Priority: 1, Weight: 1}}},
			{Name: "telecom-main", Members: []FixtureMember{{Channel: "ct-a", Priority: 0, Weight: 1}, {Channel: "ct-b", Priority: 1, Weight: 1}}},
			{Name: "mobile-marketing", Members: []FixtureMember{{Channel: "cm-b", Priority: 0, Weight: 1}}},
		},
		Blacklist: []string{"13800000000", "18600000000"},
		Enterprises: []FixtureEnterprise{
			{
				Name: "yuntong", Title: "云通科技有限公司", Balance: 500_000,
				Signatures: []FixtureSignature{
					{Text: "云通科技", Registrations: all(rules.RegApproved, "01", nil)},
					{Text: "云通商城", Registrations: all(rules.RegPending, "02", map[string]rules.RegState{"cm-b": rules.RegApproved})},
				},
				Templates: []FixtureTemplate{
					{Code: "otp", Kind: "verification", Body: "您的验证码是${code}，${minutes}分钟内有效，请勿泄露。", State: rules.TemplateApproved},
					{Code: "order-shipped", Kind: "notification", Body: "您的订单${order}已发货，预计${date}送达。", State: rules.TemplateApproved},
					{Code: "promo", Kind: "marketing", Body: "双十二全场${discount}折，回T退订。", State: rules.TemplatePending},
				},
				Blacklist: []string{"13900000001"},
				Apps: []FixtureApp{
					{Name: "otp", DailyLimit: 100_000, Prices: prices(DemoPrice), Routes: otpRoutes,
						Frequency: []FixtureFrequency{{Window: time.Minute, Max: 1}, {Window: time.Hour, Max: 5}, {Window: 24 * time.Hour, Max: 10}}},
					{Name: "notify", Prices: prices(DemoPrice), Routes: routes(),
						Frequency: []FixtureFrequency{{Window: 24 * time.Hour, Max: 20}}},
				},
			},
			{
				Name: "lanjing", Title: "蓝鲸物流有限公司", Balance: 200_000,
				Signatures: []FixtureSignature{
					{Text: "蓝鲸物流", Registrations: all(rules.RegApproved, "", map[string]rules.RegState{"ct-b": rules.RegRejected})},
				},
				Templates: []FixtureTemplate{
					{Code: "parcel", Kind: "notification", Body: "您的包裹${id}正在派送，快递员电话${phone}。", State: rules.TemplateApproved},
				},
				Apps: []FixtureApp{
					{Name: "shipping", DailyLimit: 50_000, Prices: prices(DemoPrice), Routes: routes(),
						Frequency: []FixtureFrequency{{Window: time.Hour, Max: 3}}},
				},
			},
		},
	}
}
