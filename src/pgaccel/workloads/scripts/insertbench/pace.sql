\set next_@C@ :next_@C@ + :period
SELECT pg_sleep(greatest(0, :next_@C@ - extract(epoch FROM clock_timestamp())));
