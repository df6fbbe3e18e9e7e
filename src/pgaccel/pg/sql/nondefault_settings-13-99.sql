SELECT name, setting, unit, source, context, pending_restart
FROM pg_settings
WHERE source NOT IN ('default', 'override') AND name NOT LIKE 'lc\_%'
ORDER BY name
