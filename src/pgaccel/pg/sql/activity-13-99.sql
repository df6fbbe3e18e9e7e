SELECT /* pgaccel capture */ pid, query_start, query, state
FROM pg_stat_activity
WHERE datname = %(datname)s
  AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
  AND query_start IS NOT NULL
  AND query <> ''
  AND query NOT LIKE '%%/* pgaccel capture */%%'
