CREATE INDEX @T@_marketsegment ON @T@ (productid, customerid, price);
CREATE INDEX @T@_registersegment ON @T@ (cashregisterid, customerid, price);
CREATE INDEX @T@_pdc ON @T@ (price, dateandtime, customerid);
