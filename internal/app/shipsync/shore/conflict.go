package shore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// ActiveConflictKey is a conflict's identity while it is open: the rule,
// the record, and the two revisions that disagree in sorted order, so the
// same pair met from either side (the shore meeting a node's change, or a
// node meeting the shore's) is one case.
func ActiveConflictKey(rule string, pkHash []byte, current, incoming string) string {
	a, b := current, incoming
	if b < a {
		a, b = b, a
	}
	return rule + "/" + hex.EncodeToString(pkHash) + "/" + a + "/" + b
}

// Evidence is one sighting of a conflict: an incoming change (its origin,
// id, operation and revisions) that met another current version.
type Evidence struct {
	Origin, EventID string
	Operation       pb.Operation
	Base, Result    string
	// The version it met: revision, the node whose change it is, the id of
	// what wrote it, whether the record is deleted, and the row (nil when
	// not known or absent).
	CurrentRevision, CurrentOrigin, CurrentEventID string
	CurrentTombstone                               bool
	CurrentRow                                     *pb.RowImage
	// FoundIn: "record_head", "target" (the shore's) or "node" (a node
	// reported it in a command ack).
	FoundIn string
}

// OpenConflict records ev against the record's active conflict case, or
// opens one (DETECTED) when the record has none — one active case per rule
// and record — and returns the case id and whether it was opened now. It
// runs in the caller's transaction.
func OpenConflict(ctx context.Context, tx pgx.Tx, rule string, ruleVersion uint64, pkHash []byte, pkText string,
	ev Evidence, now time.Time) (id string, opened bool, err error) {
	for range 2 {
		err := tx.QueryRow(ctx, stmts["ConflictActiveGet"], rule, pkHash).Scan(&id)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return "", false, fmt.Errorf("conflict case: %w", err)
		}
		id = uuid.NewString()
		tag, err := tx.Exec(ctx, stmts["ConflictCreate"], id, rule, int64(ruleVersion), pkHash, pkText,
			ActiveConflictKey(rule, pkHash, ev.CurrentRevision, ev.Result), now)
		if err != nil {
			return "", false, fmt.Errorf("conflict case: %w", err)
		}
		if tag.RowsAffected() == 1 {
			opened = true
			break
		}
		id = "" // opened by another transaction meanwhile: read it
	}
	if id == "" {
		return "", false, errors.New("conflict case: neither found nor opened")
	}
	var row []byte
	if ev.CurrentRow != nil {
		if row, err = proto.Marshal(ev.CurrentRow); err != nil {
			return "", false, fmt.Errorf("conflict evidence: %w", err)
		}
	}
	_, err = tx.Exec(ctx, stmts["ConflictEvidenceAdd"], id, ev.Origin, ev.EventID, ev.Operation.String(), ev.Base, ev.Result,
		ev.CurrentRevision, ev.CurrentOrigin, ev.CurrentEventID, ev.CurrentTombstone, row, ev.FoundIn, now)
	if err != nil {
		return "", false, fmt.Errorf("conflict evidence: %w", err)
	}
	return id, opened, nil
}
