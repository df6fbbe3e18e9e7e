SELECT xact_commit, xact_rollback, blks_read, blks_hit, tup_returned, tup_fetched,
       tup_inserted, tup_updated, tup_deleted, temp_files, temp_bytes, deadlocks,
       pg_current_wal_lsn() AS wal_lsn, pg_database_size(current_database()) AS db_size
FROM pg_stat_database WHERE datname = current_database()
