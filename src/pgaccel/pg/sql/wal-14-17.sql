-- pg_stat_wal exists from 14; wal_write/wal_sync moved to pg_stat_io in 18
SELECT wal_records, wal_fpi, wal_bytes::bigint AS wal_bytes, wal_buffers_full,
       wal_write, wal_sync
FROM pg_stat_wal
