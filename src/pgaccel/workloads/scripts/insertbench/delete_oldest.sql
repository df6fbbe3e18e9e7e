\set dhi_@C@ :dmin_@C@ + @ROWS@
DELETE FROM @T@ WHERE transactionid >= :dmin_@C@ AND transactionid < :dhi_@C@;
