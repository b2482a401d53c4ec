package client

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// metaCommandCursor names the downlink cursor in client_meta: where the
// next command page starts.
const metaCommandCursor = "command_cursor"

// DownlinkMark is the ship's downlink checkpoints (each the next command
// sequence past a contiguous prefix; 0 while no command was stored):
// Stored past the commands stored, Applied past those with a local result,
// Acked past those whose result the shore acknowledged — the downlink's
// platform checkpoint (seed 004 §7.6: a command counts only once its
// result is final and acknowledged).
type DownlinkMark struct {
	Stored, Applied, Acked uint64
}

// DownlinkMark returns the saved downlink checkpoints.
func (s *Store) DownlinkMark(ctx context.Context) (DownlinkMark, error) {
	var m DownlinkMark
	err := s.db.QueryRowContext(ctx, stmts["DownlinkMark"], s.group).Scan(&m.Stored, &m.Applied, &m.Acked)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("client: read downlink checkpoint: %w", err)
	}
	return m, nil
}

// CommandCounts is the inbound_command census: commands by result
// (APPLIED, ALREADY_APPLIED, CONFLICT_REPORTED, REJECTED; RECEIVED for
// those not applied yet) and how many results await the shore's
// acknowledgement.
type CommandCounts struct {
	ByResult map[string]int64
	Unacked  int64
}

// CommandCounts counts the downlink commands by result.
func (s *Store) CommandCounts(ctx context.Context) (CommandCounts, error) {
	c := CommandCounts{ByResult: map[string]int64{}}
	rows, err := s.db.QueryContext(ctx, stmts["CommandCounts"])
	if err != nil {
		return c, fmt.Errorf("client: count commands: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r string
		var acked bool
		var n int64
		if err := rows.Scan(&r, &acked, &n); err != nil {
			return c, fmt.Errorf("client: count commands: %w", err)
		}
		c.ByResult[r] += n
		if !acked && r != commandReceived {
			c.Unacked += n
		}
	}
	return c, rows.Err()
}

// commandReceived is a stored command without a result.
const commandReceived = "RECEIVED"

// commandKind is how inbound_command names a command's body.
func commandKind(cmd *pb.Command) string {
	switch cmd.GetBody().(type) {
	case *pb.Command_Change:
		return "CHANGE"
	case *pb.Command_Decision:
		return "DECISION"
	case *pb.Command_Resend:
		return "RESEND"
	}
	return "UNKNOWN"
}

// commandPageError is a page the ship will not store: a gap in the
// sequences, a number reused. Retried (the shore may serve it right next
// time); it never moves the cursor.
type commandPageError struct{ detail string }

func (e *commandPageError) Error() string { return "command page refused: " + e.detail }

// recordCommands stores the commands of one page and its next cursor in
// one transaction, before any of them is applied. Sequences must continue
// the stored ones without a gap (next: the first expected; 0 while none is
// stored, when any start is taken); a command stored already is skipped if
// it has the same number. It returns how many were new.
func (s *Store) recordCommands(ctx context.Context, cmds []*pb.Command, next uint64, cursor string) (int, error) {
	added := 0
	err := s.tx(ctx, "record commands", nil, func(tx *sql.Tx, now int64) error {
		for _, cmd := range cmds {
			id, seq := cmd.GetCommandId(), cmd.GetSequence()
			if id == "" || seq == 0 {
				return &commandPageError{detail: fmt.Sprintf("a command without id or sequence (sequence %d)", seq)}
			}
			if next != 0 && seq > next {
				return &commandPageError{detail: fmt.Sprintf("sequence %d follows %d: a gap", seq, next-1)}
			}
			body, err := proto.Marshal(cmd)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, stmts["CommandInsert"], id, int64(seq), commandKind(cmd), body, now)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				added++
				next = seq + 1
				continue
			}
			var have int64
			if err := tx.QueryRowContext(ctx, stmts["CommandSequence"], id).Scan(&have); err != nil || uint64(have) != seq {
				return &commandPageError{detail: fmt.Sprintf("sequence %d is taken by another command, or the command by another sequence", seq)}
			}
		}
		if cursor != "" {
			if _, err := tx.ExecContext(ctx, stmts["MetaSet"], metaCommandCursor, cursor); err != nil {
				return err
			}
		}
		return s.saveDownlinkMark(ctx, tx, now)
	})
	return added, err
}

func (s *Store) saveDownlinkMark(ctx context.Context, tx *sql.Tx, now int64) error {
	_, err := tx.ExecContext(ctx, stmts["DownlinkMarkSave"], s.group, now)
	return err
}

// unappliedCommands returns up to limit stored commands without a result,
// in sequence order.
func (s *Store) unappliedCommands(ctx context.Context, limit int) ([]*pb.Command, error) {
	rows, err := s.db.QueryContext(ctx, stmts["CommandsUnapplied"], limit)
	if err != nil {
		return nil, fmt.Errorf("client: read commands: %w", err)
	}
	defer rows.Close()
	var out []*pb.Command
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("client: read commands: %w", err)
		}
		cmd := &pb.Command{}
		if err := proto.Unmarshal(body, cmd); err != nil {
			return nil, fmt.Errorf("client: stored command does not decode: %w", err)
		}
		out = append(out, cmd)
	}
	return out, rows.Err()
}

// intendCommand records in applied_command what cmd is about to write
// (result PENDING), before the write: the ship's capture may deliver the
// write to the normaliser, which looks the command up by the id the write
// stamps, before the apply returns.
func (s *Store) intendCommand(ctx context.Context, id string, in normalize.AppliedCommand) error {
	if _, err := s.db.ExecContext(ctx, stmts["CommandIntent"], strings.ToLower(id), in.Operation.String(),
		in.ResultRevision, micros(s.clock.Now())); err != nil {
		return fmt.Errorf("client: record command intent: %w", err)
	}
	return nil
}

// recordCommandResult stores a command's result and the ack to send, the
// applied_command result beside it, and the downlink checkpoints.
func (s *Store) recordCommandResult(ctx context.Context, ack *pb.CommandAck) error {
	body, err := proto.Marshal(ack)
	if err != nil {
		return err
	}
	result := commandResultName(ack.Result)
	var reason string
	if ack.Reason != pb.RejectReason_REJECT_REASON_UNSPECIFIED {
		reason = ack.Reason.String()
	}
	return s.tx(ctx, "record command result", nil, func(tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx, stmts["CommandResult"], result, nullable(reason), nullable(ack.CurrentRevision),
			body, now, ack.CommandId); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, stmts["AppliedResult"], result, now, strings.ToLower(ack.CommandId)); err != nil {
			return err
		}
		return s.saveDownlinkMark(ctx, tx, now)
	})
}

// unackedCommands returns up to limit results the shore has not
// acknowledged, in sequence order.
func (s *Store) unackedCommands(ctx context.Context, limit int) ([]*pb.CommandAck, error) {
	rows, err := s.db.QueryContext(ctx, stmts["CommandsUnacked"], limit)
	if err != nil {
		return nil, fmt.Errorf("client: read command acks: %w", err)
	}
	defer rows.Close()
	var out []*pb.CommandAck
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fmt.Errorf("client: read command acks: %w", err)
		}
		ack := &pb.CommandAck{}
		if err := proto.Unmarshal(body, ack); err != nil {
			return nil, fmt.Errorf("client: stored ack of command %s does not decode: %w", bound(id, 40), err)
		}
		out = append(out, ack)
	}
	return out, rows.Err()
}

// recordAcked marks commands acknowledged with the shore's answer
// (id → RECEIVED or the refusal) and saves the downlink checkpoints.
func (s *Store) recordAcked(ctx context.Context, answered map[string]string) error {
	return s.tx(ctx, "record command acks", nil, func(tx *sql.Tx, now int64) error {
		for id, status := range answered {
			if _, err := tx.ExecContext(ctx, stmts["CommandAcked"], status, now, id); err != nil {
				return err
			}
		}
		return s.saveDownlinkMark(ctx, tx, now)
	})
}

// commandResultName is how the state names a command result.
func commandResultName(r pb.CommandResult) string {
	return strings.TrimPrefix(r.String(), "COMMAND_")
}
