package relayredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relayredis"
)

// A sink appends each event to the stream named by its topic; Publish returns
// one error per event. (Not run: it needs a Redis server.)
func Example() {
	sink, err := relayredis.New(relayredis.Config{Addr: "127.0.0.1:6379", MaxLen: 100_000, MaxLenApprox: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sink.Close(ctx)
	}()
	errs := sink.Publish(context.Background(), []relaysink.Event{
		{ID: "ev-1", Topic: "orders", Key: "order-7", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"state":"new"}`)},
		{ID: "ev-2", Topic: "orders", Key: "order-7", Seq: 2, Type: relaysink.Tombstone},
	})
	for _, err := range errs {
		if err != nil {
			fmt.Println(err) // the dispatcher re-publishes the key from here
		}
	}
}
