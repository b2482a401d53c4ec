package admit_test

import (
	"fmt"

	"github.com/relayhq/relay/internal/app/sms/admit"
)

// ExampleSign signs a request the way a client must (docs/sms/api.md has
// the same worked example): HMAC-SHA256 with the app's secret (the bytes,
// not their hex) over "METHOD\nPATH\nTIMESTAMP\nBODY".
func ExampleSign() {
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes; a real one is random
	body := []byte(`{"client_msg_id":"order-1001","numbers":["13812345678"],"template":"otp","sign_name":"云通科技","params":{"code":"4321","minutes":"5"}}`)
	fmt.Printf("%q\n", admit.Canonical("POST", "/v1/messages", "1764640800", body))
	fmt.Println(admit.Sign(secret, "POST", "/v1/messages", 1764640800, body))
	// Output:
	// "POST\n/v1/messages\n1764640800\n{\"client_msg_id\":\"order-1001\",\"numbers\":[\"13812345678\"],\"template\":\"otp\",\"sign_name\":\"云通科技\",\"params\":{\"code\":\"4321\",\"minutes\":\"5\"}}"
	// 472bbd9eb158028d63cbf27ba75be03407dfad873a1919f385fedd95b64e2020
}
