-- Queries of `relay bench`; both stores accept $N placeholders.

-- name: EffectInsert
INSERT INTO bench_effect (queue, msg_id) VALUES ($1, $2);

-- name: EffectCount
SELECT COUNT(*) FROM bench_effect WHERE queue = $1;
