-- pg_stat_io (PostgreSQL 16+): I/O by all backends and background processes, summed.
-- (18 adds byte columns; the operation counts below exist in 16, 17 and 18.)
SELECT sum(reads)::bigint AS reads, sum(writes)::bigint AS writes,
       sum(extends)::bigint AS extends, sum(hits)::bigint AS hits,
       sum(evictions)::bigint AS evictions, sum(fsyncs)::bigint AS fsyncs
FROM pg_stat_io
