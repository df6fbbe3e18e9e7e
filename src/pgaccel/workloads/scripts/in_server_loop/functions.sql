-- exec_query_in_loop_plpgsql(n): pgbench's select-only query n times inside the server.
-- VOLATILE (the default): a fresh snapshot per query, as separate client queries get.
CREATE OR REPLACE FUNCTION exec_query_in_loop_plpgsql(n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  naccounts int;
  v_aid int;
  bal int;
BEGIN
  SELECT count(*) * 100000 INTO naccounts FROM pgbench_branches;
  FOR i IN 1..n LOOP
    v_aid := 1 + floor(random() * naccounts)::int;
    SELECT abalance INTO bal FROM pgbench_accounts WHERE aid = v_aid;
  END LOOP;
  RETURN n;
END
$$;
