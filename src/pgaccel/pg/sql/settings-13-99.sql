SELECT name, setting, unit, vartype, source, sourcefile, sourceline, pending_restart,
       current_setting(name) AS shown
FROM pg_settings WHERE name = ANY(%s)
