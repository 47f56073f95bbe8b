/* tests/bench/median.h: the median the CPU benchmarks report (shim_cpubench.c,
 * train_cpubench.c): sorts v in place. */
#ifndef CUBPF_TESTS_BENCH_MEDIAN_H
#define CUBPF_TESTS_BENCH_MEDIAN_H

#include <stddef.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return v[n / 2];
}

#endif
