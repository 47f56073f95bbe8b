/* vm/metrics.c: maps as Prometheus metrics (text exposition format 0.0.4).
 *
 * The one formatter of cubpf's generic map series, shared by the two endpoints: the shim's
 * (CUBPF_METRICS, shim/live/metrics.c, from the maps it reads back) and cubpf run's (--metrics,
 * tools/tool_metrics.c, from the traces' MAP records).  It lives here because it needs only
 * what a map is (a name, key and value sizes, copies per value) and its entries, which both
 * have, and vm/ is the lowest module both may include.  Which maps count what, and so which
 * named metrics a tool has (kcount's runs, launchlate's histogram), stays with the tools: the
 * shim cannot know that a map's key is a kernel id (memtrace folds id % 64 * 8 + space into its
 * key), so kernel names come as an info metric (id -> name) that PromQL joins on. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

/* Bytes of the UTF-8 sequence at s (1 for ASCII), 0 when it is not valid UTF-8. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2
		: s[0] < 0x80 ? 1 : 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

void vm_metrics_label(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	while (*s) {
		int n = utf8_len(s);
		if (*s == '\\' || *s == '"')
			fputc('\\', f), fputc(*s, f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (n == 0 || *s < 0x20 || *s == 0x7F) /* bytes from a file, never raw */
			fprintf(f, "\\\\x%02x", *s), n = 1;
		else
			fwrite(s, 1, (size_t)n, f);
		s += n ? n : 1;
	}
}

void vm_metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void vm_metrics_kernel_labels(FILE *f, const char *mangled)
{
	const char *part = mangled;
	size_t n = strlen(mangled);
	if (!strncmp(mangled, "_Z", 2) && mangled[2] >= '1' && mangled[2] <= '9') {
		char *end;
		unsigned long k = strtoul(mangled + 2, &end, 10);
		if (k && k <= strlen(end))
			part = end, n = k;
	}
	char *shortname = strndup(part, n);
	fputs("kernel=\"", f);
	vm_metrics_label(f, shortname ? shortname : mangled);
	fputs("\",name=\"", f);
	vm_metrics_label(f, mangled);
	fputc('"', f);
	free(shortname);
}

static void open_labels(FILE *f, const char *name, const char *labels)
{
	fprintf(f, "%s{%s%s", name, labels ? labels : "", labels && *labels ? "," : "");
}

void vm_metrics_kernel_info(FILE *f, const char *labels, uint32_t id, const char *mangled)
{
	open_labels(f, "cubpf_kernel_info", labels);
	fprintf(f, "id=\"%u\",", id);
	vm_metrics_kernel_labels(f, mangled);
	fputs("} 1\n", f);
}

/* Words of a value: 4-byte values are one u32, multiples of 8 bytes u64 words (at most
 * VM_METRICS_WORDS); other sizes are not numbers (0). */
static uint32_t value_words(uint32_t value_size, uint32_t *width)
{
	*width = value_size == 4 ? 4 : 8;
	if (value_size == 4)
		return 1;
	if (!value_size || value_size % 8)
		return 0;
	return value_size / 8 < VM_METRICS_WORDS ? value_size / 8 : VM_METRICS_WORDS;
}

/* Entry i's words summed over its copies, added into sum. */
static void entry_words(const struct vm_metrics_map *m, size_t i, uint32_t words, uint32_t width,
			uint64_t *sum)
{
	const uint8_t *v = m->kv + i * ((size_t)m->key_size + (size_t)m->value_size * m->copies) +
			   m->key_size;
	for (uint32_t c = 0; c < m->copies; c++, v += m->value_size)
		for (uint32_t w = 0; w < words; w++) {
			uint64_t x = 0;
			memcpy(&x, v + (size_t)w * width, width);
			sum[w] += x;
		}
}

static void value_series(FILE *f, const char *labels, const struct vm_metrics_map *m,
			 const char *key, const uint64_t *sum, uint32_t words)
{
	for (uint32_t w = 0; w < words; w++) {
		if (!sum[w])
			continue;
		open_labels(f, "cubpf_map_value", labels);
		fputs("map=\"", f);
		vm_metrics_label(f, m->name);
		if (m->device >= 0)
			fprintf(f, "\",device=\"%d", m->device);
		fprintf(f, "\",key=\"%s\",word=\"%u\"} %" PRIu64 "\n", key, w, sum[w]);
	}
}

void vm_metrics_map_values(FILE *f, const char *labels, const struct vm_metrics_map *m)
{
	uint32_t width, words = value_words(m->value_size, &width);
	uint64_t other[VM_METRICS_WORDS] = {0};
	int folded = 0;
	if (!words || !m->copies)
		return;
	for (size_t i = 0; i < m->count; i++) {
		uint64_t sum[VM_METRICS_WORDS] = {0};
		entry_words(m, i, words, width, i < VM_METRICS_KEYS ? sum : other);
		if (i >= VM_METRICS_KEYS) {
			folded = 1;
			continue;
		}
		char key[200];
		const uint8_t *k = m->kv + i * ((size_t)m->key_size + (size_t)m->value_size * m->copies);
		vm_map_format_bytes(k, m->key_size, key, sizeof(key));
		value_series(f, labels, m, key, sum, words);
	}
	if (folded)
		value_series(f, labels, m, "_other", other, words);
}
