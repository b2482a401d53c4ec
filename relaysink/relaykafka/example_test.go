package relaykafka_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaykafka"
)

// A dispatcher publishes a batch and re-publishes each key from its first
// unconfirmed event; here every event is confirmed.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	sink, err := relaykafka.New(relaykafka.Config{Brokers: cluster.ListenAddrs(), ClientID: "example"})
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
	// event 0 confirmed: true
	// event 1 confirmed: true
}
