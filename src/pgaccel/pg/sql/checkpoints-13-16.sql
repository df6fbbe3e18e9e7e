-- checkpoint counters before PostgreSQL 17 (pg_stat_bgwriter)
SELECT checkpoints_timed AS timed, checkpoints_req AS requested,
       buffers_checkpoint AS buffers_written, buffers_backend AS backend_writes
FROM pg_stat_bgwriter
