\set id random(1, :table_size)
\set id2 :id + :range_size - 1
SELECT SUM(k) FROM @T@ WHERE id BETWEEN :id AND :id2;
