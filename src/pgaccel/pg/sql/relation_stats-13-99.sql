SELECT n.nspname, c.relname, c.relkind, pg_relation_size(c.oid) AS bytes,
       pg_total_relation_size(c.oid) AS total_bytes, c.reltuples::bigint AS reltuples,
       s.n_live_tup, s.seq_scan, s.idx_scan, s.n_tup_ins, s.n_tup_upd, s.n_tup_del
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg_temp%%' AND c.relkind IN ('r', 'p', 'i', 'm')
ORDER BY pg_total_relation_size(c.oid) DESC
