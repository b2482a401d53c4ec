package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/faultpoint"
)

// RemoteApplier applies downlink commands to the ship's database
// (remote.Applier). Apply is called for one command at a time, in
// sequence order.
type RemoteApplier interface {
	// Intent is what applying cmd writes — the operation and the result
	// revision its row will carry — or ok false when it writes nothing.
	Intent(cmd *pb.Command) (in normalize.AppliedCommand, ok bool)
	// Apply applies cmd and returns its ack; an error is an infrastructure
	// failure with nothing decided (apply it again later). ctx governs the
	// database round trips.
	Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandAck, error)
}

// Downlink defaults (Config.CommandPollEvery, Config.CommandPage).
const (
	CommandPollEveryDefault = 2 * time.Second
	CommandPageDefault      = 500
	// CommandPageMax is the largest command page the shore serves, and the
	// most acks one request carries.
	CommandPageMax = 1000
)

// downlink pulls the shore's commands, applies them in order and
// acknowledges their results until ctx ends or the state store fails. A
// failed request or apply waits a backoff (a Retry-After wins) and tries
// again from where the saved state says; a page with more commands after
// it is followed at once, an empty one after CommandPollEvery.
func (c *Client) downlink(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		more, err := c.downlinkRound(ctx)
		if se := (*storeError)(nil); errors.As(err, &se) {
			return se.err
		}
		if m, err := c.cfg.Store.DownlinkMark(ctx); err == nil {
			c.downCheckpoint.Store(m.Acked)
		}
		wait := c.cfg.CommandPollEvery
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			c.downFailures.Add(1)
			wait = c.cfg.Backoff.Delay(failures, err)
			failures++
			c.log.Warn("shipsync client: downlink failed; retrying", "err", err, "wait", wait)
		case more:
			failures = 0
			continue
		default:
			failures = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Clock.After(wait):
		}
	}
	return nil
}

// downlinkRound is one round of the downlink: results not yet acknowledged
// are sent, stored commands not yet applied are applied, then the next
// page is pulled, stored (with its cursor, in one transaction) and its
// commands applied and acknowledged. more reports that the shore has more
// commands after the page. A *storeError must stop the client.
func (c *Client) downlinkRound(ctx context.Context) (more bool, err error) {
	if err := c.settleCommands(ctx); err != nil {
		return false, err
	}
	cursor, err := c.cfg.Store.meta(ctx, metaCommandCursor)
	if err != nil {
		return false, &storeError{err}
	}
	page, err := c.cfg.Transport.Commands(ctx, cursor, c.cfg.CommandPage)
	c.commandPulls.Add(1)
	if err != nil {
		return false, err
	}
	mark, err := c.cfg.Store.DownlinkMark(ctx)
	if err != nil {
		return false, &storeError{err}
	}
	added, err := c.cfg.Store.recordCommands(ctx, page.Commands, mark.Stored, page.NextCursor)
	if pe := (*commandPageError)(nil); errors.As(err, &pe) {
		c.log.Error("shipsync client: the shore's command page is refused; pulling it again later", "err", err)
		return false, pe
	}
	if err != nil {
		return false, &storeError{err}
	}
	c.commandsStored.Add(int64(added))
	if len(page.Commands) > 0 {
		if err := c.settleCommands(ctx); err != nil {
			return false, err
		}
	}
	return page.More && len(page.Commands) > 0, nil
}

// settleCommands sends the results the shore has not acknowledged, applies
// the stored commands that have none, and sends their results.
func (c *Client) settleCommands(ctx context.Context) error {
	if err := c.ackCommands(ctx); err != nil {
		return err
	}
	applyErr := c.applyCommands(ctx)
	if se := (*storeError)(nil); errors.As(applyErr, &se) {
		return applyErr
	}
	// The results reached before a failed apply are acknowledged anyway.
	return errors.Join(applyErr, c.ackCommands(ctx))
}

// applyCommands applies the stored commands without a result in sequence
// order, stopping at the first that fails (a later command may depend on
// it: they are one record's changes in order).
func (c *Client) applyCommands(ctx context.Context) error {
	for {
		cmds, err := c.cfg.Store.unappliedCommands(ctx, CommandPageMax)
		if err != nil {
			return &storeError{err}
		}
		for _, cmd := range cmds {
			if err := c.applyCommand(ctx, cmd); err != nil {
				return err
			}
		}
		if len(cmds) < CommandPageMax {
			return nil
		}
	}
}

// applyCommand applies one stored command and stores its result. What it
// is about to write goes to applied_command first (seed 004 §12): the
// ship's capture may hand the write to the normaliser before Apply
// returns, and a crash after the write and before the result leaves the
// command to be applied again — answered from the ship database's ledger.
func (c *Client) applyCommand(ctx context.Context, cmd *pb.Command) error {
	if in, ok := c.cfg.Remote.Intent(cmd); ok {
		if err := c.cfg.Store.intendCommand(ctx, cmd.CommandId, in); err != nil {
			return &storeError{err}
		}
	}
	ack, err := c.cfg.Remote.Apply(ctx, cmd)
	if err != nil {
		return fmt.Errorf("apply command %d: %w", cmd.Sequence, err)
	}
	ack.CommandId = cmd.CommandId
	if err := c.cfg.Store.recordCommandResult(ctx, ack); err != nil {
		return &storeError{err}
	}
	c.commandsApplied.Add(1)
	if ack.Result == pb.CommandResult_COMMAND_CONFLICT_REPORTED {
		// (A rejection is logged by the applier, which knows why.)
		c.log.Warn("shipsync client: downlink command conflicts with the ship's row; reported to the shore",
			"command", cmd.CommandId, "sequence", cmd.Sequence, "reason", ack.Reason.String())
	}
	return nil
}

// ackCommands sends every stored result the shore has not acknowledged,
// CommandPageMax per request, and records the answers: RECEIVED, or a
// refusal (a command the shore does not know for this node: logged, and
// never sent again). A RETRYABLE_FAILURE stays to be sent again.
func (c *Client) ackCommands(ctx context.Context) error {
	for {
		acks, err := c.cfg.Store.unackedCommands(ctx, CommandPageMax)
		if err != nil {
			return &storeError{err}
		}
		if len(acks) == 0 {
			return nil
		}
		resp, err := c.cfg.Transport.Acks(ctx, &pb.CommandAckBatch{ProtocolVersion: wire.CurrentVersion.String(),
			NodeId: c.cfg.NodeID, Acks: acks})
		if err != nil {
			return err
		}
		faultpoint.Hit(faultpoint.ShipsyncClientAfterAcks)
		if len(resp.Statuses) != len(acks) {
			return &RequestError{Status: 200, Retryable: true,
				Detail: fmt.Sprintf("answer has %d statuses for %d acks", len(resp.Statuses), len(acks))}
		}
		answered := map[string]string{}
		for i, st := range resp.Statuses {
			id := acks[i].CommandId
			switch st.Status {
			case pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED:
				answered[id] = "RECEIVED"
			case pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED:
				why := "REFUSED " + st.Reason.String()
				if st.Field != "" {
					why += " on " + st.Field
				}
				answered[id] = why
				c.log.Error("shipsync client: the shore refused a command's ack", "command", id, "reason", why)
			}
		}
		if err := c.cfg.Store.recordAcked(ctx, answered); err != nil {
			return &storeError{err}
		}
		c.commandsAcked.Add(int64(len(answered)))
		if len(answered) < len(acks) {
			return &RequestError{Status: 200, Retryable: true, Detail: "some acks were not stored by the shore"}
		}
		if len(acks) < CommandPageMax {
			return nil
		}
	}
}
