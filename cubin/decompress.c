/* Payload decompression on demand (zstd, LZ4 raw block or frame) and image release.  Sizes in
 * the entry header are checked against what the compressed data really holds, before any
 * allocation is made from them. */
#include <lz4.h>
#include <lz4frame.h>
#include <stdlib.h>
#include <zstd.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

#define FAIL(img, ...) cubin_fail((img)->error, sizeof((img)->error), __VA_ARGS__)
#define LZ4_FRAME_MAGIC 0x184D2204u
/* LZ4's worst-case expansion is 255 output bytes per input byte; a declared size beyond that
 * cannot be genuine, and refusing it keeps a damaged header from asking for terabytes. */
#define LZ4_MAX_RATIO 255u
/* zstd frames from nvcc always record their content size; one that does not gets this cap. */
#define UNKNOWN_CONTENT_CAP (1ull << 32)
/* What n bytes of zstd frame can decode to at most: a block is at least 4 bytes (3 of header,
 * 1 of RLE payload) and decodes to at most 128 KiB (RFC 8878).  A declared size beyond it is
 * refused before the buffer is allocated (ZSTD_decompressBound would believe the header). */
#define ZSTD_BYTES_BOUND(n) (((unsigned long long)(n) / 4 + 1) * (128u << 10))

static int zstd_payload(struct cubin_image *img, struct cubin_entry *e, size_t index,
			uint8_t *dst)
{
	if (!img->zstd && !(img->zstd = ZSTD_createDCtx()))
		return FAIL(img, "out of memory (zstd context)");
	size_t n = ZSTD_decompressDCtx(img->zstd, dst, e->size, e->payload, e->compressed_size);
	if (ZSTD_isError(n))
		return FAIL(img, "entry %zu: zstd: %s", index, ZSTD_getErrorName(n));
	if (n != e->size)
		return FAIL(img, "entry %zu: zstd payload holds %zu bytes, header says %llu", index, n,
			    (unsigned long long)e->size);
	return 0;
}

/* The size a zstd payload declares, checked against the header before allocating.  Trailing
 * zero padding after the frame (nvcc pads to 8 bytes) is cut off here. */
static int zstd_check(struct cubin_image *img, struct cubin_entry *e, size_t index)
{
	size_t framelen = ZSTD_findFrameCompressedSize(e->payload, e->compressed_size);
	if (ZSTD_isError(framelen))
		return FAIL(img, "entry %zu: zstd: %s", index, ZSTD_getErrorName(framelen));
	unsigned long long content = ZSTD_getFrameContentSize(e->payload, e->compressed_size);
	if (content == ZSTD_CONTENTSIZE_ERROR)
		return FAIL(img, "entry %zu: not a zstd frame", index);
	if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != e->size)
		return FAIL(img, "entry %zu: zstd frame holds %llu bytes, header says %llu", index,
			    content, (unsigned long long)e->size);
	if (content == ZSTD_CONTENTSIZE_UNKNOWN && e->size > UNKNOWN_CONTENT_CAP)
		return FAIL(img, "entry %zu: declared size %llu is implausible", index,
			    (unsigned long long)e->size);
	if (e->size > ZSTD_BYTES_BOUND(framelen))
		return FAIL(img, "entry %zu: declared size %llu is beyond what %zu zstd bytes can hold",
			    index, (unsigned long long)e->size, framelen);
	/* Bytes after the frame must be padding: a second frame would be silently dropped. */
	for (size_t i = framelen; i < e->compressed_size; i++)
		if (e->payload[i])
			return FAIL(img, "entry %zu: %llu bytes after the zstd frame are not padding",
				    index, (unsigned long long)(e->compressed_size - framelen));
	e->compressed_size = framelen;
	return 0;
}

static int lz4_frame(struct cubin_image *img, struct cubin_entry *e, size_t index, uint8_t *dst)
{
	LZ4F_dctx *dctx;
	if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		return FAIL(img, "out of memory (LZ4 context)");
	size_t in_at = 0, out_at = 0, rc = 1;
	while (rc != 0 && in_at < e->compressed_size) {
		size_t in = e->compressed_size - in_at, out = e->size - out_at;
		rc = LZ4F_decompress(dctx, dst + out_at, &out, e->payload + in_at, &in, NULL);
		if (LZ4F_isError(rc))
			break;
		in_at += in;
		out_at += out;
		if (in == 0 && out == 0)
			break; /* no progress: output full or input exhausted */
	}
	LZ4F_freeDecompressionContext(dctx);
	if (LZ4F_isError(rc))
		return FAIL(img, "entry %zu: LZ4 frame: %s", index, LZ4F_getErrorName(rc));
	if (rc != 0 || out_at != e->size)
		return FAIL(img, "entry %zu: LZ4 frame holds %s%zu bytes, header says %llu", index,
			    rc ? "more than " : "", out_at, (unsigned long long)e->size);
	return 0;
}

static int lz4_payload(struct cubin_image *img, struct cubin_entry *e, size_t index, uint8_t *dst)
{
	if (e->compressed_size >= 4 && cubin_rd32(e->payload) == LZ4_FRAME_MAGIC)
		return lz4_frame(img, e, index, dst);
	if (e->compressed_size > INT32_MAX || e->size > INT32_MAX)
		return FAIL(img, "entry %zu: LZ4 block larger than 2 GiB", index);
	int n = LZ4_decompress_safe((const char *)e->payload, (char *)dst, (int)e->compressed_size,
				    (int)e->size);
	if (n < 0)
		return FAIL(img, "entry %zu: LZ4 block is damaged (or larger than the header says)",
			    index);
	if ((uint64_t)n != e->size)
		return FAIL(img, "entry %zu: LZ4 block holds %d bytes, header says %llu", index, n,
			    (unsigned long long)e->size);
	return 0;
}

static int plausible_size(struct cubin_image *img, struct cubin_entry *e, size_t index)
{
	if (e->compression == CUBIN_ZSTD)
		return zstd_check(img, e, index);
	if (e->size / LZ4_MAX_RATIO > e->compressed_size + 64)
		return FAIL(img, "entry %zu: declared size %llu is beyond what %llu LZ4 bytes can hold",
			    index, (unsigned long long)e->size,
			    (unsigned long long)e->compressed_size);
	return 0;
}

int cubin_entry_data(struct cubin_image *img, size_t index, const uint8_t **data, size_t *size)
{
	if (index >= img->entry_count)
		return FAIL(img, "entry %zu does not exist (%zu entries)", index, img->entry_count);
	struct cubin_entry *e = &img->entries[index];
	if (!e->data) {
		if (plausible_size(img, e, index))
			return -1;
		uint8_t *buf = malloc(e->size ? e->size : 1);
		if (!buf)
			return FAIL(img, "entry %zu: out of memory for %llu bytes", index,
				    (unsigned long long)e->size);
		int rc = e->compression == CUBIN_ZSTD ? zstd_payload(img, e, index, buf)
						      : lz4_payload(img, e, index, buf);
		if (rc) {
			free(buf);
			return -1;
		}
		e->owned = buf;
		e->data = buf;
	}
	*data = e->data;
	*size = e->size;
	return 0;
}

void cubin_entry_release(struct cubin_image *img, size_t index)
{
	if (index >= img->entry_count || !img->entries[index].owned)
		return;
	free(img->entries[index].owned);
	img->entries[index].owned = NULL;
	img->entries[index].data = NULL;
}

void cubin_image_free(struct cubin_image *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->entry_count; i++)
		free(img->entries[i].owned);
	ZSTD_freeDCtx(img->zstd);
	free(img->entries);
	free(img->fatbins);
	free(img);
}
