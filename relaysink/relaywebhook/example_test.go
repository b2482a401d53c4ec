package relaywebhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// A receiver puts a Receiver's Handler in front of its own handler, which
// sees only requests whose v2 signature, timestamp and freshness were
// checked, and answers 2xx to confirm; the dispatcher's sink publishes a
// batch.
func Example() {
	hookSecret := []byte("whsec-example")
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: hookSecret})
	if err != nil {
		panic(err)
	}
	receiver := httptest.NewServer(rv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, _ := relaywebhook.EventFromContext(r.Context()) // the verified fields
		fmt.Printf("%s %s %s key=%s seq=%d %q\n", r.URL.Path, ev.ID, ev.Type, ev.Key, ev.Seq, ev.Payload)
		w.WriteHeader(http.StatusNoContent)
	})))
	defer receiver.Close()

	sink, err := relaywebhook.New(relaywebhook.Config{URL: receiver.URL + "/hooks", Secret: hookSecret})
	if err != nil {
		panic(err)
	}
	defer sink.Close(context.Background())

	errs := sink.Publish(context.Background(), []relaysink.Event{
		{ID: "e1", Topic: "orders", Key: "order-7", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"total":10}`)},
		{ID: "e2", Topic: "orders", Key: "order-7", Seq: 2, Type: relaysink.Tombstone},
	})
	for i, err := range errs {
		fmt.Printf("event %d confirmed: %v\n", i, err == nil)
	}
	// Output:
	// /hooks/orders e1 UPSERT key=order-7 seq=1 "{\"total\":10}"
	// /hooks/orders e2 TOMBSTONE key=order-7 seq=2 ""
	// event 0 confirmed: true
	// event 1 confirmed: true
}

// A Receiver refuses a captured request sent again within the tolerance
// (409), the same request under another key (401), and, once the clock has
// moved past the tolerance, the old request as expired (401).
func ExampleReceiver() {
	hookSecret := []byte("whsec-example")
	clock := relayclock.NewFake(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: hookSecret, Clock: clock, Tolerance: time.Minute})
	if err != nil {
		panic(err)
	}
	receiver := httptest.NewServer(rv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer receiver.Close()

	// A tombstone as the sink signs it (Sink does this for every event).
	ev := relaysink.Event{ID: "e2", Topic: "orders", Key: "order-7", Seq: 2, Type: relaysink.Tombstone}
	signature := relaywebhook.SignV2(hookSecret, clock.Now(), ev)
	send := func(key string) {
		req, err := http.NewRequest(http.MethodPost, receiver.URL+"/hooks/orders", nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set(relaysink.HeaderEventID, ev.ID)
		req.Header.Set(relaysink.HeaderSeq, "2")
		req.Header.Set(relaysink.HeaderType, string(ev.Type))
		req.Header.Set(relaywebhook.HeaderKey, key)
		req.Header.Set(relaywebhook.HeaderSignatureV2, signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("key=%s: %d %s", key, resp.StatusCode, msg)))
	}
	send("order-7") // the delivery
	send("order-7") // the same request again
	send("order-8") // the tombstone moved to another key
	clock.Advance(time.Minute + time.Second)
	send("order-7") // the first request, after the window
	fmt.Println("remembered:", rv.Remembered())
	// Output:
	// key=order-7: 204
	// key=order-7: 409 request replayed
	// key=order-8: 401 signature mismatch
	// key=order-7: 401 signature timestamp outside tolerance
	// remembered: 0
}
