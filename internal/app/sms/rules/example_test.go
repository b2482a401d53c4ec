package rules_test

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/sms/rules"
)

// ExampleSnapshot_Check plans one template message: normalised number,
// carrier, rendered and signed text, segments, price and the channels to
// try; then shows a refusal with its reason code and HTTP status.
func ExampleSnapshot_Check() {
	snap, err := rules.NewSnapshot(rules.Data{
		Carriers:    []rules.Carrier{{Code: "mobile", Name: "China Mobile"}},
		Segments:    []rules.NumberSegment{{Prefix: "139", Carrier: "mobile"}},
		Enterprises: []rules.Enterprise{{ID: 1, Name: "yuntong", Active: true}},
		Apps:        []rules.App{{ID: 7, EnterpriseID: 1, Name: "otp", APIKey: "k", Active: true}},
		Channels:    []rules.Channel{{ID: 3, Name: "cm-a", Carrier: "mobile", SrcID: "10690001", Active: true}},
		Signatures:  []rules.Signature{{ID: 5, EnterpriseID: 1, Text: "云通科技", Active: true}},
		Registrations: []rules.Registration{
			{SignatureID: 5, ChannelID: 3, State: rules.RegApproved, ExtCode: "01"},
		},
		Templates: []rules.Template{{ID: 9, EnterpriseID: 1, Code: "otp", Body: "验证码${code}，5分钟内有效。",
			State: rules.TemplateApproved}},
		Blacklist: []rules.BlacklistEntry{{Number: "13900000000"}},
		Groups:    []rules.ChannelGroup{{ID: 2, Name: "main", Members: []rules.GroupMember{{ChannelID: 3, Weight: 1}}}},
		Routes:    []rules.Route{{ID: 1, AppID: 7, Carrier: "mobile", GroupID: 2}},
		Prices:    []rules.PriceRule{{AppID: 7, Carrier: "mobile", Unit: 45}},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, rules.ChinaTime)
	req := rules.Request{AppID: 7, Number: "+86 139 1234 5678", SignName: "云通科技", TemplateCode: "otp",
		Params: map[string]string{"code": "4821"}}
	p, err := snap.Check(req, now, rules.RouteOpts{})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Number, p.Carrier, p.Text)
	fmt.Println(p.Segments, "segment at", p.UnitPrice, "=", p.Amount)
	fmt.Println("channel", p.Candidates[rules.Pick(p.Candidates, 42)].Channel, "src", p.Candidates[0].SrcID)

	req.Number = "13900000000"
	_, err = snap.Check(req, now, rules.RouteOpts{})
	r, _ := rules.ReasonOf(err)
	fmt.Println(r, r.Status(), err)
	// Output:
	// 13912345678 mobile 【云通科技】验证码4821，5分钟内有效。
	// 1 segment at 0.045 CNY = 0.045 CNY
	// channel cm-a src 1069000101
	// blacklisted 403 sms: blacklisted: the number is on a blacklist
}
