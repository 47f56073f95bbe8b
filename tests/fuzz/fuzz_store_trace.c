/* libFuzzer target: the trace reader on arbitrary bytes.  Every record is decoded the way
 * `cubpf trace dump` does (fixed part, strings, string table); nothing may read out of bounds,
 * leak or crash, whatever the input. */
#include <stdint.h>
#include <stdlib.h>

#include "store/store.h"

static void decode(struct store_trace_reader *r, const struct store_trace_record *rec)
{
	uint8_t fixed[128];
	size_t sizes[STORE_REC_MAX_KNOWN + 1] = {
		[STORE_REC_DEVICE] = sizeof(struct store_rec_device),
		[STORE_REC_CLOCK] = sizeof(struct store_rec_clock),
		[STORE_REC_PROGRAM] = sizeof(struct store_rec_program),
		[STORE_REC_API] = sizeof(struct store_rec_api),
		[STORE_REC_KERNEL] = sizeof(struct store_rec_kernel),
		[STORE_REC_COPY] = sizeof(struct store_rec_copy),
		[STORE_REC_PROBE] = sizeof(struct store_rec_probe),
		[STORE_REC_MAP] = sizeof(struct store_rec_map),
		[STORE_REC_DROP] = sizeof(struct store_rec_drop),
		[STORE_REC_END] = sizeof(struct store_rec_end),
		[STORE_REC_KSPAN] = sizeof(struct store_rec_kspan),
		[STORE_REC_KERNEL_ID] = sizeof(struct store_rec_kernel_id),
		[STORE_REC_NOT_INSTRUMENTED] = sizeof(struct store_rec_not_instrumented),
		[STORE_REC_MAP_MEMORY] = sizeof(struct store_rec_map_memory),
		[STORE_REC_HOST_MAP] = sizeof(struct store_rec_map),
		[STORE_REC_RINGBUF] = sizeof(struct store_rec_ringbuf),
	};
	size_t rest = 0;
	if (rec->type > STORE_REC_MAX_KNOWN || !sizes[rec->type])
		return;
	const uint8_t *p = store_rec_fixed(rec, fixed, sizes[rec->type], &rest);
	if (!p)
		return;
	for (int i = 0; i < 2; i++)
		free(store_rec_string(&p, &rest));
	if (rec->type == STORE_REC_API) {
		struct store_rec_api a;
		__builtin_memcpy(&a, fixed, sizeof(a));
		(void)store_trace_string(r, a.name);
	} else if (rec->type == STORE_REC_KERNEL_ID) {
		struct store_rec_kernel_id k;
		__builtin_memcpy(&k, fixed, sizeof(k));
		(void)store_trace_string(r, k.name);
		(void)store_trace_string(r, k.module);
	} else if (rec->type == STORE_REC_NOT_INSTRUMENTED) {
		struct store_rec_not_instrumented n;
		__builtin_memcpy(&n, fixed, sizeof(n));
		(void)store_trace_string(r, n.api);
		(void)store_trace_string(r, n.label);
		(void)store_noinst_reason_name(n.reason);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open_mem(data, size, err, sizeof(err));
	struct store_trace_record rec;
	if (!r)
		return 0;
	(void)store_trace_header_string(r, 2);
	while (store_trace_next(r, &rec) == 1)
		decode(r, &rec);
	(void)store_trace_state(r);
	store_trace_close_reader(r);
	return 0;
}
