\set id random(1, :table_size)
\set r random(0, 99999999999)
UPDATE @T@ SET c = repeat(lpad(:r::text, 11, '0') || '-', 10) WHERE id = :id;
