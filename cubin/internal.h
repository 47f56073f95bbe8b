/* Private to cubin/: little-endian field readers and error formatting. */
#ifndef CUBPF_CUBIN_INTERNAL_H
#define CUBPF_CUBIN_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Unaligned little-endian loads: images come from anywhere (mmap, a driver argument, a
 * decompressed buffer), so no alignment is assumed.  The compiler turns these into plain
 * loads on x86-64 and aarch64. */
static inline uint16_t cubin_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t cubin_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t cubin_rd64(const uint8_t *p)
{
	return (uint64_t)cubin_rd32(p) | (uint64_t)cubin_rd32(p + 4) << 32;
}

/* True when [off, off + len) lies inside a buffer of `size` bytes, without overflow. */
static inline int cubin_in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

__attribute__((format(printf, 3, 4)))
static inline int cubin_fail(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return -1;
}

#endif
