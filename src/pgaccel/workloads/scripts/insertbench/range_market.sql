\set v random(0, 9999)
SELECT productid, customerid, price FROM @T@ WHERE productid >= :v ORDER BY productid, customerid, price LIMIT 10;
