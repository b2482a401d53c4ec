package wire_test

import (
	"cmp"
	"errors"
	"fmt"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// Example_uploadBatch shows both ends of POST /sync/v1/batches: the ship
// encodes a batch, the shore decodes it and gives every event its own
// receive status from ValidateEvent (a real shore answers RECEIVED only
// after committing the event to its inbox).
func Example_uploadBatch() {
	codec, err := wire.NewCodec(wire.Config{}) // 500 events, 4 MiB, zstd from 16 KiB
	if err != nil {
		panic(err)
	}
	bad := validEvent(2)
	bad.PrimaryKey = nil // a missing key is refused, never guessed
	body, err := codec.Encode(newBatch([]*pb.ChangeEvent{validEvent(1), bad}))
	if err != nil {
		panic(err)
	}

	batch, err := codec.Decode(body)
	if err != nil {
		fmt.Println(wire.ErrorBody(err).Code) // the whole request is refused
		return
	}
	for _, ev := range batch.Events {
		st := &pb.EventStatus{EventId: ev.EventId, Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED}
		var fe *wire.FieldError
		if err := codec.ValidateEvent(ev); errors.As(err, &fe) {
			st.Status, st.Reason, st.Field = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, fe.Reason, fe.Field
		}
		fmt.Println(st.EventId, st.Status, st.Reason, cmp.Or(st.Field, "-"))
	}
	// Output:
	// 00000000-0000-4000-8000-000000000001 RECEIVE_STATUS_RECEIVED REJECT_REASON_UNSPECIFIED -
	// 00000000-0000-4000-8000-000000000002 RECEIVE_STATUS_PERMANENT_REJECTED REJECT_REASON_MISSING_FIELD primary_key
}
