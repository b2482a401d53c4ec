-- relay_work: one durable work record per (queue, key), re-armed by every new
-- fact about the key (revision), processed by at most one worker at a time
-- under a lease, with a fencing token (fence) that a stale holder cannot pass.
-- Every time is written by the queries (a parameter, or clock_timestamp()).
CREATE TABLE relay_work (
    queue              text        NOT NULL CHECK (queue <> '' AND char_length(queue) <= 200),
    key                text        NOT NULL CHECK (key <> '' AND char_length(key) <= 200),
    -- revision counts the facts seen (Bump); processed_revision is the
    -- revision the last successful run (Done) had claimed.
    revision           bigint      NOT NULL DEFAULT 0 CHECK (revision >= 0),
    processed_revision bigint      NOT NULL DEFAULT 0 CHECK (processed_revision >= 0 AND processed_revision <= revision),
    state              text        NOT NULL CHECK (state IN ('pending', 'processing', 'retry_wait', 'idle', 'needs_review')),
    lease_owner        text,
    lease_until        timestamptz,
    -- fence is incremented by every successful claim: the fencing token.
    fence              bigint      NOT NULL DEFAULT 0 CHECK (fence >= 0),
    -- attempts counts consecutive failures; Done resets it.
    attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- retry_wait: when the next attempt is due; idle: an optional wake-up
    -- (NULL: sleep until a new fact); NULL in every other state.
    next_attempt_at    timestamptz,
    -- last_error is bounded, sanitised error text, never a payload.
    last_error         text        CHECK (char_length(last_error) <= 300),
    created_at         timestamptz NOT NULL,
    -- updated_at is when the state last changed (a Bump of a row already
    -- pending does not move it, so a busy key keeps its place in line).
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (queue, key),
    CONSTRAINT relay_work_lease_only_processing CHECK (
        (state = 'processing') = (lease_owner IS NOT NULL)
        AND (state = 'processing') = (lease_until IS NOT NULL)),
    CONSTRAINT relay_work_next_attempt CHECK (
        (state <> 'retry_wait' OR next_attempt_at IS NOT NULL)
        AND (state IN ('retry_wait', 'idle') OR next_attempt_at IS NULL))
);

-- The claim scan reads four bounded ranges, one per partial index.
CREATE INDEX relay_work_pending ON relay_work (queue, updated_at) WHERE state = 'pending';
CREATE INDEX relay_work_retry_due ON relay_work (queue, next_attempt_at) WHERE state = 'retry_wait';
CREATE INDEX relay_work_idle_wake ON relay_work (queue, next_attempt_at) WHERE state = 'idle' AND next_attempt_at IS NOT NULL;
CREATE INDEX relay_work_lease ON relay_work (queue, lease_until) WHERE state = 'processing';
-- Operators list and count what waits for a person.
CREATE INDEX relay_work_needs_review ON relay_work (queue, updated_at) WHERE state = 'needs_review';
