-- The gateway's durable dedupe of submit commands (docs/sms/gateway.md).
-- One row per submitId, claimed before any byte goes to the supplier. A row
-- in any state but NOT_SENT is never submitted again.
CREATE TABLE gateway_submit (
    submit_id  numeric(20, 0) PRIMARY KEY,
    channel    text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('CLAIMED', 'ACCEPTED', 'REJECTED', 'UNKNOWN', 'NOT_SENT')),
    msg_id     numeric(20, 0),
    result     text,
    claimed_by text        NOT NULL,
    claimed_at timestamptz NOT NULL,
    settled_at timestamptz
);
