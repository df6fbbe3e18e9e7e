SELECT /* pgaccel capture */ stats_reset::timestamptz(0)::text FROM pg_stat_statements_info
