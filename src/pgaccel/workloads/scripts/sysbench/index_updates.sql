\set id random(1, :table_size)
UPDATE @T@ SET k = k + 1 WHERE id = :id;
