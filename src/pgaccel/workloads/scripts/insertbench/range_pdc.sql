\set v random(0, 499)
SELECT price, dateandtime, customerid FROM @T@ WHERE price >= :v ORDER BY price, dateandtime, customerid LIMIT 10;
