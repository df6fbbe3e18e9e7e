\set v random(0, 999)
SELECT cashregisterid, customerid, price FROM @T@ WHERE cashregisterid > :v ORDER BY cashregisterid, customerid, price LIMIT 10;
