-- checkpoint counters from PostgreSQL 17 on (pg_stat_checkpointer)
SELECT num_timed AS timed, num_requested AS requested,
       buffers_written, NULL::bigint AS backend_writes
FROM pg_stat_checkpointer
