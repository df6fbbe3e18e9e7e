\set id random(1, :table_size)
\set k random(1, :table_size)
\set r1 random(0, 99999999999)
\set r2 random(0, 99999999999)
DELETE FROM @T@ WHERE id = :id;
INSERT INTO @T@ (id, k, c, pad) VALUES (:id, :k, repeat(lpad(:r1::text, 11, '0') || '-', 10), repeat(lpad(:r2::text, 11, '0') || '-', 5)) ON CONFLICT (id) DO NOTHING;
