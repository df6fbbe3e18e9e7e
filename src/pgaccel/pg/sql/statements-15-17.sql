SELECT /* pgaccel capture */ s.dbid, s.userid, s.queryid, s.query, s.calls, s.total_exec_time,
       s.mean_exec_time, s.stddev_exec_time, s.rows, s.shared_blks_hit, s.shared_blks_read,
       s.temp_blks_written, s.wal_bytes::bigint AS wal_bytes,
       s.jit_generation_time + s.jit_inlining_time + s.jit_optimization_time
         + s.jit_emission_time AS jit_ms,
       NULL::bigint AS par_workers
FROM pg_stat_statements s
WHERE (%(datname)s::text IS NULL OR s.dbid = (SELECT oid FROM pg_database WHERE datname = %(datname)s))
  AND s.toplevel
  AND s.query NOT LIKE '%%/* pgaccel capture */%%'
