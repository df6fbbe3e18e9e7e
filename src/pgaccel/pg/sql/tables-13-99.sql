SELECT coalesce(sum(autovacuum_count), 0) AS autovacuum,
       coalesce(sum(autoanalyze_count), 0) AS autoanalyze,
       coalesce(sum(vacuum_count), 0) AS vacuum
FROM pg_stat_user_tables
