-- One Insert Benchmark table per client (@T@), without secondary indexes (step l.x adds them).
DROP TABLE IF EXISTS @T@;
CREATE TABLE @T@ (
  transactionid bigserial PRIMARY KEY,
  dateandtime timestamp without time zone,
  cashregisterid int NOT NULL,
  customerid int NOT NULL,
  productid int NOT NULL,
  price int NOT NULL,
  data varchar(4000)
);
-- as iibench.py: the id sequence hands each connection 1000 values at a time
ALTER SEQUENCE @T@_transactionid_seq CACHE 1000;
