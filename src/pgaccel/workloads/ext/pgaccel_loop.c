/*
 * pgaccel_loop: exec_query_in_loop(n) runs pgbench's select-only query
 *     SELECT abalance FROM pgbench_accounts WHERE aid = <random id>
 * n times inside the server through SPI, so that no client, protocol or network cost is
 * part of the measurement (study 003).  Each execution takes a fresh snapshot, as the
 * equivalent PL/pgSQL function (VOLATILE) and separate client queries do.
 *
 * Built with PGXS against the server's own headers; loaded by absolute path from
 * CREATE FUNCTION ... LANGUAGE C, so nothing is installed into the server's directories.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(exec_query_in_loop);

/* xorshift64*: a private random stream, independent of the server's PRNG API. */
static uint64 rng_state = 0;

static uint64
next_random(void)
{
	uint64		x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * UINT64CONST(0x2545F4914F6CDD1D);
}

Datum
exec_query_in_loop(PG_FUNCTION_ARGS)
{
	int64		n = PG_GETARG_INT64(0);
	int64		naccounts;
	int64		i;
	bool		isnull;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1];
	SPIPlanPtr	plan;
	int			ret;

	if (rng_state == 0)
		rng_state = ((uint64) MyProcPid * UINT64CONST(0x9E3779B97F4A7C15)) ^
			(uint64) GetCurrentTimestamp() ^ UINT64CONST(1);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "exec_query_in_loop: SPI_connect failed");

	ret = SPI_execute("SELECT count(*) FROM pgbench_branches", true, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "exec_query_in_loop: cannot read pgbench_branches");
	naccounts = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 1, &isnull)) * 100000;
	if (isnull || naccounts <= 0)
		elog(ERROR, "exec_query_in_loop: pgbench_branches is empty");
	SPI_freetuptable(SPI_tuptable);

	plan = SPI_prepare("SELECT abalance FROM pgbench_accounts WHERE aid = $1", 1, argtypes);
	if (plan == NULL)
		elog(ERROR, "exec_query_in_loop: SPI_prepare failed: %s",
			 SPI_result_code_string(SPI_result));

	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		values[0] = Int32GetDatum((int32) (next_random() % (uint64) naccounts) + 1);
		ret = SPI_execute_plan(plan, values, NULL, false, 1);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "exec_query_in_loop: query failed: %s",
				 SPI_result_code_string(ret));
		SPI_freetuptable(SPI_tuptable);
	}

	SPI_finish();
	PG_RETURN_INT64(n);
}
