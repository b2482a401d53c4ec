package relaywebhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// A receiver verifies each request's signature before trusting it and
// answers 2xx to confirm; the dispatcher's sink publishes a batch.
func Example() {
	hookSecret := []byte("whsec-example")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if err := relaywebhook.VerifySignature(hookSecret, r.Header.Get(relaywebhook.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Printf("%s %s %s %s %q\n", r.URL.Path, r.Header.Get(relaysink.HeaderEventID),
			r.Header.Get(relaysink.HeaderSeq), r.Header.Get(relaysink.HeaderType), body)
		w.WriteHeader(http.StatusNoContent)
	}))
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
	// /hooks/orders e1 1 UPSERT "{\"total\":10}"
	// /hooks/orders e2 2 TOMBSTONE ""
	// event 0 confirmed: true
	// event 1 confirmed: true
}
