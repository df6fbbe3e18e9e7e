-- load_analyze = after: autovacuum's ANALYZE held off @T@ while l.i0 loads it (the largest
-- threshold there is; inserts alone then never reach it)
ALTER TABLE @T@ SET (autovacuum_analyze_threshold = 2147483647)
