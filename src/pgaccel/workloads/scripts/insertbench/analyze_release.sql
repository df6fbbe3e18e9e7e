-- load_analyze = after, once l.i0 is done: @T@'s statistics from the loaded table, and
-- autovacuum's own ANALYZE thresholds again for the steps after
ALTER TABLE @T@ RESET (autovacuum_analyze_threshold);
ANALYZE @T@
