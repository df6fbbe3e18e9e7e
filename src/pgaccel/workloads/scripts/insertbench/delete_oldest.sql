\set dhi_@C@ :dmin_@C@ + @ROWS@
DELETE FROM @T@ WHERE transactionid IN (SELECT transactionid FROM @T@ WHERE transactionid >= :dmin_@C@ ORDER BY transactionid ASC LIMIT @ROWS@);
