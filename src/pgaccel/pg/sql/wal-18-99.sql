SELECT wal_records, wal_fpi, wal_bytes::bigint AS wal_bytes, wal_buffers_full,
       NULL::bigint AS wal_write, NULL::bigint AS wal_sync
FROM pg_stat_wal
