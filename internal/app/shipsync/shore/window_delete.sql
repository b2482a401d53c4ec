-- MariaDB: the conditional delete of a window reconcile.

-- name: WindowDelete
-- One target row outside the dataset window, deleted only as the plan saw
-- it: {{table}} is a backtick-quoted plain identifier and {{where}} the key
-- columns' equalities, the business time before the boundary and, for a
-- revisioned table, the revision the plan read (WindowDelete builds both).
DELETE FROM {{table}} WHERE {{where}};
