SELECT name, context, vartype, unit, min_val, max_val, enumvals, reset_val,
       current_setting(name) AS shown
FROM pg_settings
