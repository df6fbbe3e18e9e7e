-- One sysbench table, as `sysbench oltp_* prepare` creates it for the pgsql driver:
-- serial id, random k in [1, N], c = 10 and pad = 5 random 11-digit groups joined by '-'.
-- @T@ = table name, @I@ = table number, @N@ = rows.
DROP TABLE IF EXISTS @T@;
CREATE TABLE @T@ (
  id SERIAL,
  k INTEGER DEFAULT '0' NOT NULL,
  c CHAR(120) DEFAULT '' NOT NULL,
  pad CHAR(60) DEFAULT '' NOT NULL,
  PRIMARY KEY (id)
);
INSERT INTO @T@ (k, c, pad)
SELECT 1 + floor(random() * @N@)::int,
       concat_ws('-', lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0')),
       concat_ws('-', lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'),
                      lpad(floor(random() * 1e11)::bigint::text, 11, '0'))
FROM generate_series(1, @N@);
CREATE INDEX k_@I@ ON @T@ (k);
