/*
 * pgaccel hugetext: the server's code on transparent huge pages (study 000's ".text on huge
 * pages", which cut its iTLB misses tenfold).
 *
 * Loaded with LD_PRELOAD into the postmaster only.  Its constructor runs before main():
 * it finds the executable's r-xp mapping in /proc/self/maps, copies the 2 MB-aligned part of
 * it aside, maps anonymous memory over that range with MADV_HUGEPAGE, copies the code back
 * and makes it read-only and executable again.  Backends are forked from the postmaster, so
 * they share the huge-page mapping.  The kernel's file THP for code would do the same
 * without copying, but needs CONFIG_READ_ONLY_THP_FOR_FS and a binary linked with 2 MB
 * segment alignment; this works with THP "madvise" or "always" on any kernel and binary.
 *
 * Only a process whose executable is named "postgres" is touched (LD_PRELOAD is inherited
 * by everything the server starts).  The remap never runs code in the range it replaces:
 * this function lives in the preloaded library, memcpy in libc.  Any failure leaves the
 * original mapping in place (the copy is made over the range only after everything it
 * needs is allocated).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE (2UL << 20)

static void pgaccel_hugetext(void) __attribute__((constructor));

static void
pgaccel_hugetext(void)
{
	char		exe[4096];
	char		line[4352];
	ssize_t		n;
	const char *base;
	FILE	   *maps;
	unsigned long start = 0, end = 0;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	if (strcmp(base, "postgres") != 0)
		return;

	maps = fopen("/proc/self/maps", "r");
	if (maps == NULL)
		return;
	while (fgets(line, sizeof(line), maps))
	{
		unsigned long s, e;
		char		perms[8];
		int			pathpos = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &s, &e, perms, &pathpos) < 3 ||
			pathpos == 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(perms, "r-xp") == 0 && strcmp(line + pathpos, exe) == 0)
		{
			start = s;
			end = e;
			break;
		}
	}
	fclose(maps);
	if (end == 0)
		return;

	{
		unsigned long a = (start + HUGE - 1) & ~(HUGE - 1);
		unsigned long b = end & ~(HUGE - 1);
		size_t		len;
		void	   *copy;
		void	   *p;

		if (b <= a)
			return;				/* less than one aligned huge page of code */
		len = b - a;
		copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (copy == MAP_FAILED)
			return;
		memcpy(copy, (void *) a, len);
		p = mmap((void *) a, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED)
		{
			munmap(copy, len);
			return;				/* the original mapping is still there */
		}
		madvise(p, len, MADV_HUGEPAGE);
		memcpy(p, copy, len);
		mprotect(p, len, PROT_READ | PROT_EXEC);
		madvise(p, len, MADV_COLLAPSE);	/* 6.1+: make sure; older kernels ignore it */
		munmap(copy, len);
	}
}
