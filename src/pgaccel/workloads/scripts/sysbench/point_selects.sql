\set id random(1, :table_size)
SELECT c FROM @T@ WHERE id = :id;
