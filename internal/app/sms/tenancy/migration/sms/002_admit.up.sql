-- Stage A of the send chain: the API's inbox rows and the admission stage's
-- limit counters (internal/app/sms/admit, docs/sms/api.md). Every time is a
-- parameter; money is bigint li.

-- One API request: one client message to one or more numbers. id is the
-- engine message of queue sms-admit that carries the request, so the API
-- and the stage name it alike. The API inserts the row as 'accepted' in the
-- transaction that enqueues the request; the admission stage moves it once
-- to 'admitted' (rules passed, limits counted, price frozen) or 'refused'
-- (with its reason), in the transaction that completes the engine message.
CREATE TABLE sms_message (
    id            bigint PRIMARY KEY,
    app_id        bigint      NOT NULL REFERENCES sms_app (id),
    -- The client's idempotency key, unique per app.
    client_msg_id text        NOT NULL CHECK (client_msg_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
    -- As requested; normalised (11 digits) once admitted.
    numbers       text[]      NOT NULL CHECK (cardinality(numbers) BETWEEN 1 AND 100),
    sign_name     text        NOT NULL,
    template_code text        NOT NULL,
    params        jsonb       NOT NULL,
    -- The request's content; once admitted, the text as sent
    -- (【signature】 then the body, the template rendered).
    content       text        NOT NULL,
    -- Set once admitted: the carrier of each number (same order as
    -- numbers), the segments of the text (the same for every number), the
    -- unit price per segment of each number's carrier, and the total frozen.
    carriers      text[],
    segments      integer CHECK (segments BETWEEN 1 AND 255),
    unit_li       bigint[],
    amount_li     bigint CHECK (amount_li > 0),
    state         text        NOT NULL CHECK (state IN ('accepted', 'admitted', 'refused')),
    reason        text,
    detail        text CHECK (length(detail) <= 300),
    accepted_at   timestamptz NOT NULL,
    decided_at    timestamptz,
    UNIQUE (app_id, client_msg_id),
    CHECK ((state = 'refused') = (reason IS NOT NULL)),
    CHECK ((state = 'accepted') = (decided_at IS NULL)),
    CHECK (state <> 'admitted' OR (segments IS NOT NULL AND amount_li IS NOT NULL
        AND cardinality(carriers) = cardinality(numbers) AND cardinality(unit_li) = cardinality(numbers)))
);

-- A limit counter: messages counted under a rules.LimitKey
-- ("daily:<app>:<day>", "freq:<app>:<window>:<start>:<number>"), one row
-- per key, so every worker — and a replay — counts the same row. The stage
-- locks a batch's rows in key order (INSERT … ON CONFLICT DO UPDATE), decides
-- under the locks and writes the counts guarded by the limit. until: the end
-- of the key's window; the row may be deleted after it.
CREATE TABLE sms_limit_counter (
    key        text PRIMARY KEY CHECK (key <> ''),
    count      integer     NOT NULL CHECK (count >= 0),
    until      timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX sms_limit_counter_until ON sms_limit_counter (until);
