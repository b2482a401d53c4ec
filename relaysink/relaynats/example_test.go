package relaynats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaynats"
)

// A sink publishes a batch to JetStream subjects (a stream must cover them)
// and reports one result per event; a dispatcher re-publishes each key from
// its first unconfirmed event.
func Example() {
	sink, err := relaynats.New(relaynats.Config{URL: "nats://127.0.0.1:4222", Timeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer sink.Close(context.Background())

	events := []relaysink.Event{
		{ID: "ev-1", Topic: "orders", Key: "order-7", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"state":"new"}`)},
		{ID: "ev-2", Topic: "orders", Key: "order-7", Seq: 2, Type: relaysink.Tombstone},
	}
	for i, err := range sink.Publish(context.Background(), events) {
		if err != nil {
			fmt.Printf("event %s not confirmed: %v\n", events[i].ID, err)
		}
	}
}
