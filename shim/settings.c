/* shim/settings.c: the numeric settings of cubpf, checked in one place.
 *
 * Each CUBPF_* number the shim reads is also an option of `cubpf run` (or set by it): the two
 * must accept the same values and refuse the same way, so both go through this table.  A value
 * that passed here cannot break the code that uses it: CUBPF_SAMPLE of 0, or of a multiple of
 * 2^32 once cut to 32 bits, used to divide by zero at the first launch under CUBPF_CONTROL
 * (SIGFPE in the application); sizes are bounded so that "<< 20" cannot wrap.
 * Linked into libcuda.so.1 and into the cubpf command: calls nothing else of the shim. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "shim/shim.h"

struct setting {
	const char *env, *option; /* option: the `cubpf run` option that sets it, or NULL */
	uint64_t min, max;
};

static const struct setting settings[SHIM_SET_COUNT] = {
	[SHIM_SET_SAMPLE] = {"CUBPF_SAMPLE", "--sample", 1, 1ull << 31},
	[SHIM_SET_RINGBUF_MB] = {"CUBPF_RINGBUF_MB", "--ringbuf-mb", 1, 1ull << 20},
	[SHIM_SET_MAP_MAX_MB] = {"CUBPF_MAP_MAX_MB", "--map-max-mb", 1, 1ull << 24},
	/* -i sets it in seconds (10^7 at most), checked as seconds there */
	[SHIM_SET_INTERVAL_MS] = {"CUBPF_INTERVAL_MS", NULL, 1, 10000000000ull},
	[SHIM_SET_PERTHREAD_THREADS] = {"CUBPF_PERTHREAD_THREADS", NULL, 1, 1ull << 31},
	/* the drain and the writer take 16 at most (RB_MAX_THREADS, MAX_WORKERS) */
	[SHIM_SET_RINGBUF_THREADS] = {"CUBPF_RINGBUF_THREADS", NULL, 1, 16},
	[SHIM_SET_TRACE_THREADS] = {"CUBPF_TRACE_THREADS", NULL, 1, 16},
	[SHIM_SET_VERIFY_TIMEOUT_MS] = {"CUBPF_VERIFY_TIMEOUT_MS", NULL, 1, 3600000},
	[SHIM_SET_CACHE_WAIT_MS] = {"CUBPF_CACHE_WAIT_MS", NULL, 1, 60000},
	[SHIM_SET_ENABLE_WORDS] = {"CUBPF_ENABLE_WORDS", NULL, 0, 1},
	[SHIM_SET_SHARED_SUMS] = {"CUBPF_SHARED_SUMS", NULL, 0, 1},
};

const char *shim_setting_name(enum shim_setting_id id)
{
	return (unsigned)id < SHIM_SET_COUNT ? settings[id].env : "?";
}

/* Decimal digits only: strtoull alone takes "-1" (as 2^64-1), " 5", "+5" and "0x10". */
static int whole_number(const char *t, uint64_t *out)
{
	char *end;
	if (!t || *t < '0' || *t > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(t, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int shim_setting_parse(enum shim_setting_id id, const char *text, uint64_t *out, char *err,
		       size_t errlen)
{
	if ((unsigned)id >= SHIM_SET_COUNT) {
		snprintf(err, errlen, "unknown setting %d", (int)id);
		return -1;
	}
	const struct setting *s = &settings[id];
	uint64_t v;
	if (whole_number(text, &v) || v < s->min || v > s->max) {
		snprintf(err, errlen, "%s%s%s%s '%.64s': expected a whole number from %llu to %llu",
			 s->env, s->option ? " (" : "", s->option ? s->option : "",
			 s->option ? ")" : "", text ? text : "", (unsigned long long)s->min,
			 (unsigned long long)s->max);
		return -1;
	}
	*out = v;
	return 0;
}

int shim_settings_check_env(char *err, size_t errlen)
{
	for (int i = 0; i < SHIM_SET_COUNT; i++) {
		const char *v = getenv(settings[i].env);
		uint64_t x;
		if (v && *v && shim_setting_parse((enum shim_setting_id)i, v, &x, err, errlen))
			return -1;
	}
	return 0;
}
