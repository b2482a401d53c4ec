package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncUpload is a small test client of the shore: it uploads one
// batch of synthetic INSERT events over mutual TLS and prints the answer.
// The real ship client is a later piece of work.
func runShipsyncUpload(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync upload", "shipsync upload --url https://127.0.0.1:8443 --ca FILE --cert FILE --key FILE "+
		"[--events 10] [--first 1] [--batch-id UUID]")
	url := fs.String("url", "https://"+shipsyncShoreAddrDefault, "base URL of the shore")
	caFile := fs.String("ca", "", "PEM CA the shore's certificate is verified against. Required")
	certFile := fs.String("cert", "", "the node's PEM certificate (its identity is the node id). Required")
	keyFile := fs.String("key", "", "PEM private key of --cert. Required")
	n := fs.Int("events", 10, "events in the batch (1 … 500)")
	first := fs.Int("first", 1, "number of the first event: event ids derive from the node and the number, so the "+
		"same numbers resend the same events")
	batchID := fs.String("batch-id", "", "the batch id (default a new one; repeat one to see the stored answer)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync upload: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *caFile == "" || *certFile == "" || *keyFile == "" {
		return errors.New("shipsync upload: --ca, --cert and --key are required")
	}
	tc, node, err := nodeTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	if *batchID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		*batchID = formatUUID(b)
	}
	now := relayclock.System{}.Now()
	evs := make([]*pb.ChangeEvent, *n)
	for i := range evs {
		evs[i] = syntheticEvent(node, *first+i, now)
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return err
	}
	body, err := codec.Encode(&wire.Batch{NodeID: node, BatchID: *batchID, Sequence: 1, CreatedAt: now, Events: evs})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*url, "/")+shore.PathBatches, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", shore.ContentType)
	tr := &http.Transport{TLSClientConfig: tc}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("shipsync upload: %w", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("shipsync upload: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb pb.ErrorBody
		if err := proto.Unmarshal(rb, &eb); err != nil {
			return fmt.Errorf("shipsync upload: HTTP %d", resp.StatusCode)
		}
		return fmt.Errorf("shipsync upload: HTTP %d %s: %s (retryable %t)", resp.StatusCode, eb.Code, eb.Message, eb.Retryable)
	}
	var ur pb.UploadResponse
	if err := proto.Unmarshal(rb, &ur); err != nil {
		return fmt.Errorf("shipsync upload: answer: %w", err)
	}
	counts := map[pb.ReceiveStatus]int{}
	for _, st := range ur.Statuses {
		counts[st.Status]++
	}
	fmt.Fprintf(env.Stdout, "shipsync upload: node %s batch %s: %d events, %d RECEIVED, %d RETRYABLE_FAILURE, %d PERMANENT_REJECTED\n",
		node, ur.BatchId, len(ur.Statuses), counts[pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED],
		counts[pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE], counts[pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED])
	return nil
}

// uploadRule is the rule of the synthetic events (version 1): allow it with
// relay shipsync node allow-rule --rule test-table.
const uploadRule = "test-table"

// syntheticEvent is a valid INSERT of row i of a test table, its id derived
// from (node, i).
func syntheticEvent(node string, i int, now time.Time) *pb.ChangeEvent {
	sum := sha256.Sum256([]byte(fmt.Sprintf("shipsync-upload/%s/%d", node, i)))
	var id [16]byte
	copy(id[:], sum[:16])
	rev := sha256.Sum256(append(sum[:], 'r'))
	var r [16]byte
	copy(r[:], rev[:16])
	return &pb.ChangeEvent{
		SchemaVersion: "1.0", EventId: formatUUID(id), OriginNodeId: node,
		SourceConnectorId: "upload-test", SourcePartition: "test/0",
		SourcePosition: proto.Uint64(uint64(i)), SourceSequence: uint64(i),
		RuleId: uploadRule, RuleVersion: 1, Database: "test", Table: "item",
		PrimaryKey: []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(i)}}},
		Operation:  pb.Operation_OPERATION_INSERT,
		After: &pb.RowImage{Columns: []*pb.ColumnValue{
			{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(i)}},
			{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: fmt.Sprintf("row %d", i)}},
		}},
		ResultRevision: formatUUID(r), CapturedAt: timestamppb.New(now), TraceId: fmt.Sprintf("upload-%d", i),
	}
}

// formatUUID formats b as a version-4-shaped UUID (RFC 9562 variant).
func formatUUID(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
