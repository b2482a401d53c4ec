-- SubmitResps that came after their Submit's outcome was settled UNKNOWN
-- (docs/sms/gateway.md, "Late responses"). The row of gateway_submit keeps
-- UNKNOWN: this is the supplier's word on it after all, kept for whoever
-- reconciles it. One per submit: a connection answers a sequence id once.
CREATE TABLE gateway_late_response (
    submit_id   numeric(20, 0) PRIMARY KEY REFERENCES gateway_submit (submit_id),
    channel     text        NOT NULL,
    msg_id      numeric(20, 0) NOT NULL,
    result      integer     NOT NULL CHECK (result >= 0),
    received_at timestamptz NOT NULL
);
