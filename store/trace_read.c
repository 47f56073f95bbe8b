/* The trace reader: frame by frame over a mapped file (or a memory image).
 *
 * Each frame is decoded whole (the writer records its size, and zstd checks its checksum)
 * before any of its records is handed out, so a file cut anywhere yields exactly the records
 * of its whole frames.  Every length read from the file is checked before use: a damaged or
 * hostile file gives an error, never a read out of bounds.  Memory follows what the file holds:
 * a frame's buffer is no larger than its blocks can decode to, and the string table grows with
 * the STRING records read, whatever ids they declare (store_ids).  An error names the frame or
 * the record, its index and its offset. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "store/internal.h"
#include "store/store.h"

/* The sizes FORMAT.md promises: a layout change must be a new record type or a new major. */
_Static_assert(sizeof(struct store_rec_hdr) == 8, "record header");
_Static_assert(sizeof(struct store_rec_header) == 40, "HEADER");
_Static_assert(sizeof(struct store_rec_device) == 32, "DEVICE");
_Static_assert(sizeof(struct store_rec_clock) == 32, "CLOCK");
_Static_assert(sizeof(struct store_rec_program) == 24, "PROGRAM");
_Static_assert(sizeof(struct store_rec_api) == 56, "API");
_Static_assert(sizeof(struct store_rec_kernel) == 80, "KERNEL");
_Static_assert(sizeof(struct store_rec_copy) == 64, "COPY");
_Static_assert(sizeof(struct store_rec_probe) == 24, "PROBE");
_Static_assert(sizeof(struct store_rec_map) == 40, "MAP");
_Static_assert(sizeof(struct store_rec_drop) == 48, "DROP");
_Static_assert(sizeof(struct store_rec_end) == 32, "END");
_Static_assert(sizeof(struct store_rec_kspan) == 48, "KSPAN");
_Static_assert(sizeof(struct store_rec_lost) == 48, "LOST");

#define MAX_FRAME_RAW (1ull << 30) /* far above what the writer makes (a batch) */
#define ZSTD_MAGIC 0xFD2FB528u
/* What zstd bytes can decode to at most: a block is at least 4 bytes (3 of header, 1 of RLE
 * payload) and decodes to at most 128 KiB (RFC 8878).  ZSTD_decompressBound would not do: it
 * believes the frame's declared content size. */
#define ZSTD_BYTES_BOUND(n) (((unsigned long long)(n) / 4 + 1) * (128u << 10))

struct store_trace_reader {
	const uint8_t *file;
	size_t size, pos;          /* compressed input and how far frames were consumed */
	void *map;                 /* munmap on close, when mapped */
	int fd;                    /* a followed file (store_trace_open_follow), else -1 */
	ZSTD_DCtx *dctx;
	uint8_t *raw;              /* the current frame, decoded */
	size_t raw_len, raw_cap, raw_pos;
	uint64_t frames, raw_total;
	size_t frame_off;          /* file offset of the frame in raw */
	uint64_t nrec;             /* records taken from frames so far (the header is record 0) */
	uint64_t rec_idx;          /* the record being read: its index, and offset in raw */
	size_t rec_off;
	enum store_trace_state state;
	int end_seen, done;
	struct store_rec_header header;
	char *hstr[3];
	uint32_t ppid;             /* after the strings, 1.4 */
	struct store_ids ids;      /* the string table: id -> its number, */
	char **strings;            /* number -> string */
	size_t strings_cap;
	/* a PROBES record being handed out as PROBE records */
	const uint8_t *px, *px_end;  /* next sample (u32 len + bytes), end of the record */
	uint32_t px_left;            /* samples not yet handed out */
	uint64_t px_frame;
	uint8_t *xbuf;               /* the PROBE record returned: fixed part + sample */
	size_t xcap;
	char error[STORE_ERRLEN];
};

static const char *const type_names[] = {
	[STORE_REC_HEADER] = "header", [STORE_REC_STRING] = "string", [STORE_REC_DEVICE] = "device",
	[STORE_REC_CLOCK] = "clock",   [STORE_REC_PROGRAM] = "program", [STORE_REC_API] = "api",
	[STORE_REC_KERNEL] = "kernel", [STORE_REC_COPY] = "copy",     [STORE_REC_PROBE] = "probe",
	[STORE_REC_PROBES] = "probes",
	[STORE_REC_MAP] = "map",       [STORE_REC_DROP] = "drop",     [STORE_REC_END] = "end",
	[STORE_REC_KSPAN] = "kspan",   [STORE_REC_KERNEL_ID] = "kernel_id",
	[STORE_REC_NOT_INSTRUMENTED] = "not_instrumented", [STORE_REC_MAP_MEMORY] = "map_memory",
	[STORE_REC_HOST_MAP] = "host_map", [STORE_REC_RINGBUF] = "ringbuf",
	[STORE_REC_LOST] = "lost",
};

static const char *const cause_names[] = {
	[STORE_LOST_DISK_FULL] = "disk full",   [STORE_LOST_SIZE_LIMIT] = "file size limit",
	[STORE_LOST_MEMORY] = "out of memory",  [STORE_LOST_IO] = "write error",
	[STORE_LOST_COMPRESS] = "compressor failed",
};

static const char *const reason_names[] = {
	[STORE_NOINST_NO_PTX] = "no PTX",          [STORE_NOINST_REWRITE] = "rewriter",
	[STORE_NOINST_JIT] = "JIT",                [STORE_NOINST_MAPS] = "maps",
	[STORE_NOINST_REFUSED] = "driver refused", [STORE_NOINST_UNREACHABLE] = "maps unreachable",
	[STORE_NOINST_OTHER] = "other",            [STORE_NOINST_VERIFIER] = "verifier",
	[STORE_NOINST_PROBE_OBJECT] = "probe object",
};

const char *store_noinst_reason_name(uint32_t reason)
{
	if (reason < sizeof(reason_names) / sizeof(reason_names[0]) && reason_names[reason])
		return reason_names[reason];
	return "unknown";
}

const char *store_lost_cause_name(uint32_t cause)
{
	if (cause < sizeof(cause_names) / sizeof(cause_names[0]) && cause_names[cause])
		return cause_names[cause];
	return "unknown";
}

const char *store_rec_type_name(uint16_t type)
{
	if (type < sizeof(type_names) / sizeof(type_names[0]) && type_names[type])
		return type_names[type];
	return "unknown";
}

/* Reading stops at damage; the message says where. */
static int stop_damaged(struct store_trace_reader *r)
{
	r->state = STORE_TRACE_DAMAGED;
	r->done = 1;
	r->px = r->px_end = NULL; /* a damaged PROBES record: nothing more of it */
	r->px_left = 0;
	return -1;
}

/* Damage at the frame level: the frame's index and file offset. */
static int frame_damaged(struct store_trace_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int frame_damaged(struct store_trace_reader *r, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(r->error, sizeof(r->error), "frame %llu at file offset %zu: ",
			 (unsigned long long)r->frames, r->pos);
	va_start(ap, fmt);
	vsnprintf(r->error + n, sizeof(r->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return stop_damaged(r);
}

/* Damage inside a record: the record's index and type, where it starts in the decoded frame,
 * and that frame's index and file offset. */
static int record_damaged(struct store_trace_reader *r, uint16_t type, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int record_damaged(struct store_trace_reader *r, uint16_t type, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(r->error, sizeof(r->error),
			 "record %llu (%s) at byte %zu of frame %llu (file offset %zu): ",
			 (unsigned long long)r->rec_idx, store_rec_type_name(type), r->rec_off,
			 (unsigned long long)(r->frames - 1), r->frame_off);
	va_start(ap, fmt);
	vsnprintf(r->error + n, sizeof(r->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return stop_damaged(r);
}

/* ---- frames ------------------------------------------------------------------------------ */

static int is_skippable(const uint8_t *p, size_t n)
{
	uint32_t m;
	if (n < 4)
		return 0;
	memcpy(&m, p, 4);
	return (m & 0xFFFFFFF0u) == 0x184D2A50u;
}

/* The end of the input: a clean end, or a frame cut short, or bytes that are no frame. */
static int input_ends(struct store_trace_reader *r, size_t left)
{
	uint32_t m = 0;
	r->done = 1;
	if (left == 0) {
		r->state = r->end_seen ? STORE_TRACE_COMPLETE : STORE_TRACE_NO_END;
		return 0;
	}
	memcpy(&m, r->file + r->pos, left < 4 ? left : 4);
	if (left < 4 || m == ZSTD_MAGIC || is_skippable(r->file + r->pos, left)) {
		r->state = STORE_TRACE_CUT;
		snprintf(r->error, sizeof(r->error), "the last %zu bytes are a frame cut short", left);
		return 0;
	}
	return frame_damaged(r, "%zu bytes that are not a zstd frame", left);
}

/* The decoded size a frame declares, checked against what its blocks can hold: a header may
 * not make the reader allocate more than the file can fill.  0 = usable, -1 = damaged. */
static int frame_raw_size(struct store_trace_reader *r, size_t fsz, unsigned long long *raw)
{
	const uint8_t *f = r->file + r->pos;
	*raw = ZSTD_getFrameContentSize(f, fsz);
	if (*raw == ZSTD_CONTENTSIZE_ERROR || *raw == ZSTD_CONTENTSIZE_UNKNOWN)
		return frame_damaged(r, "zstd frame of %zu bytes without a usable content size", fsz);
	if (*raw > MAX_FRAME_RAW)
		return frame_damaged(r, "zstd frame declares %llu decoded bytes (at most %llu allowed)",
				     *raw, MAX_FRAME_RAW);
	if (*raw > ZSTD_BYTES_BOUND(fsz))
		return frame_damaged(r, "zstd frame declares %llu decoded bytes, its %zu bytes hold at "
				     "most %llu", *raw, fsz, ZSTD_BYTES_BOUND(fsz));
	return 0;
}

/* Decodes the next frame into r->raw.  1 = a frame, 0 = no more, -1 = damaged. */
static int next_frame(struct store_trace_reader *r)
{
	for (;;) {
		size_t left = r->size - r->pos;
		if (left == 0 || r->done)
			return r->done ? 0 : input_ends(r, left);
		size_t fsz = ZSTD_findFrameCompressedSize(r->file + r->pos, left);
		if (ZSTD_isError(fsz))
			return input_ends(r, left);
		if (is_skippable(r->file + r->pos, left)) { /* room for a future index */
			r->pos += fsz;
			continue;
		}
		unsigned long long raw;
		if (frame_raw_size(r, fsz, &raw))
			return -1;
		if (raw > r->raw_cap) {
			uint8_t *p = realloc(r->raw, raw);
			if (!p)
				return frame_damaged(r, "out of memory for a frame of %llu bytes", raw);
			r->raw = p;
			r->raw_cap = raw;
		}
		size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, r->raw_cap, r->file + r->pos, fsz);
		if (ZSTD_isError(got) || got != raw)
			return frame_damaged(r, "zstd frame of %zu bytes does not decode (%s)", fsz,
					     ZSTD_isError(got) ? ZSTD_getErrorName(got)
							       : "fewer bytes than declared");
		r->frame_off = r->pos;
		r->pos += fsz;
		r->raw_len = got;
		r->raw_pos = 0;
		r->frames++;
		r->raw_total += got;
		return 1;
	}
}

/* ---- records ------------------------------------------------------------------------------ */

const uint8_t *store_rec_fixed(const struct store_trace_record *rec, void *out, size_t fixed,
			       size_t *rest)
{
	if (rec->len < fixed)
		return NULL;
	memcpy(out, rec->payload, fixed);
	if (rest)
		*rest = rec->len - fixed;
	return rec->payload + fixed;
}

int store_rec_api_args(const struct store_trace_record *rec, uint32_t *func_id, uint64_t args[16])
{
	uint32_t hdr[2];
	size_t fixed = sizeof(struct store_rec_api);
	if (rec->type != STORE_REC_API || rec->len < fixed + sizeof(hdr))
		return -1;
	memcpy(hdr, rec->payload + fixed, sizeof(hdr));
	uint32_t n = hdr[1] > 16 ? 16 : hdr[1];
	if ((size_t)n * 8 > rec->len - fixed - sizeof(hdr))
		return -1;
	*func_id = hdr[0];
	memcpy(args, rec->payload + fixed + sizeof(hdr), (size_t)n * 8);
	return (int)n;
}

char *store_rec_string(const uint8_t **p, size_t *n)
{
	uint32_t len;
	char *s;
	if (*n < sizeof(len))
		return NULL;
	memcpy(&len, *p, sizeof(len));
	if (len > *n - sizeof(len))
		return NULL;
	s = malloc((size_t)len + 1);
	if (!s)
		return NULL;
	memcpy(s, *p + sizeof(len), len);
	s[len] = '\0';
	*p += sizeof(len) + len;
	*n -= sizeof(len) + len;
	return s;
}

/* Room for string number n (numbers come in order, so n is at most one past the last). */
static int strings_room(struct store_trace_reader *r, size_t n)
{
	if (n < r->strings_cap)
		return 0;
	size_t cap = r->strings_cap ? r->strings_cap * 2 : 64;
	char **t = realloc(r->strings, cap * sizeof(*t));
	if (!t)
		return -1;
	memset(t + r->strings_cap, 0, (cap - r->strings_cap) * sizeof(*t));
	r->strings = t;
	r->strings_cap = cap;
	return 0;
}

static int add_string(struct store_trace_reader *r, const struct store_trace_record *rec)
{
	uint32_t id;
	if (rec->len < sizeof(id))
		return record_damaged(r, rec->type, "%u bytes, shorter than a string id", rec->len);
	memcpy(&id, rec->payload, sizeof(id));
	if (id == 0)
		return record_damaged(r, rec->type, "string id 0 (never an id)");
	long n = store_ids_add(&r->ids, id);
	char *str = n >= 0 && !strings_room(r, (size_t)n)
			    ? strndup((const char *)rec->payload + sizeof(id), rec->len - sizeof(id))
			    : NULL;
	if (!str)
		return record_damaged(r, rec->type, "out of memory for string id %u (%u bytes)", id,
				      rec->len);
	free(r->strings[n]); /* defined again: the later one counts */
	r->strings[n] = str;
	return 0;
}

/* The next sample of the PROBES record in hand, as a PROBE record in r->xbuf. */
static int next_probe(struct store_trace_reader *r, struct store_trace_record *rec)
{
	const size_t fixed = sizeof(struct store_rec_probe);
	uint32_t len;
	if (r->px_end - r->px < 4)
		return record_damaged(r, STORE_REC_PROBES, "cut inside a sample; %u samples left",
				      r->px_left);
	memcpy(&len, r->px, 4);
	if ((size_t)(r->px_end - r->px - 4) < len)
		return record_damaged(r, STORE_REC_PROBES, "a sample of %u bytes runs past the "
				      "record's end (%zu bytes left)", len,
				      (size_t)(r->px_end - r->px - 4));
	if (fixed + len > r->xcap) {
		uint8_t *p = realloc(r->xbuf, fixed + len);
		if (!p)
			return record_damaged(r, STORE_REC_PROBES, "out of memory for a sample of %u "
					      "bytes", len);
		r->xbuf = p;
		r->xcap = fixed + len;
	}
	memcpy(r->xbuf + fixed, r->px + 4, len);
	r->px += 4 + (size_t)len;
	r->px_left--;
	rec->type = STORE_REC_PROBE;
	rec->len = (uint32_t)(fixed + len);
	rec->payload = r->xbuf;
	rec->frame = r->px_frame;
	return 1;
}

/* A PROBES record: keeps its fixed part in xbuf and hands out its samples from the next call. */
static int start_probes(struct store_trace_reader *r, const struct store_trace_record *rec)
{
	const size_t fixed = sizeof(struct store_rec_probe);
	uint32_t count;
	if (rec->len < fixed + 4)
		return record_damaged(r, rec->type, "%u bytes, shorter than its fixed part (%zu)",
				      rec->len, fixed + 4);
	if (r->xcap < fixed) {
		uint8_t *p = realloc(r->xbuf, 256);
		if (!p)
			return record_damaged(r, rec->type, "out of memory");
		r->xbuf = p;
		r->xcap = 256;
	}
	memcpy(r->xbuf, rec->payload, fixed);
	memcpy(&count, rec->payload + fixed, 4);
	if (count > (rec->len - fixed - 4) / 4)
		return record_damaged(r, rec->type, "%u samples declared, its %u bytes hold at most %u",
				      count, rec->len, (uint32_t)((rec->len - fixed - 4) / 4));
	r->px = rec->payload + fixed + 4;
	r->px_end = rec->payload + rec->len;
	r->px_left = count;
	r->px_frame = rec->frame;
	return 0;
}

/* A HEADER after the first record, or any record after END: not this process's trace any
 * more (files concatenated: `cat A B`, a writer that reopened the file).  Reading stops there,
 * so that two processes never read as one, nor as complete. */
static int another_trace(struct store_trace_reader *r, const struct store_rec_hdr *h)
{
	if (h->type == STORE_REC_HEADER)
		return record_damaged(r, h->type, "a second trace's header: files joined together? "
				      "(the records before it are this trace's)");
	return record_damaged(r, h->type, "a record after the end record: files joined together?");
}

int store_trace_next(struct store_trace_reader *r, struct store_trace_record *rec)
{
	struct store_rec_hdr h;
	int rc;

	if (r->state == STORE_TRACE_DAMAGED)
		return -1; /* reading stops at damage */
again:
	if (r->px_left)
		return next_probe(r, rec);
	if (r->px && r->px != r->px_end)
		return record_damaged(r, STORE_REC_PROBES, "%zu bytes after its last sample",
				      (size_t)(r->px_end - r->px));
	r->px = r->px_end = NULL;
	while (r->raw_pos >= r->raw_len)
		if ((rc = next_frame(r)) <= 0)
			return rc;
	r->rec_idx = r->nrec++;
	r->rec_off = r->raw_pos;
	if (r->raw_len - r->raw_pos < sizeof(h))
		return record_damaged(r, 0, "the frame ends %zu bytes into the record's 8-byte header",
				      r->raw_len - r->raw_pos);
	memcpy(&h, r->raw + r->raw_pos, sizeof(h));
	if (h.len > r->raw_len - r->raw_pos - sizeof(h))
		return record_damaged(r, h.type, "declares %u payload bytes, its frame holds %zu more",
				      h.len, r->raw_len - r->raw_pos - sizeof(h));
	if (r->nrec > 1 && (h.type == STORE_REC_HEADER || r->end_seen))
		return another_trace(r, &h);
	rec->type = h.type;
	rec->len = h.len;
	rec->payload = r->raw + r->raw_pos + sizeof(h);
	rec->frame = r->frames - 1;
	r->raw_pos += sizeof(h) + h.len;
	if (h.type == STORE_REC_STRING && add_string(r, rec))
		return -1;
	if (h.type == STORE_REC_END)
		r->end_seen = 1;
	if (h.type == STORE_REC_PROBES) {
		if (start_probes(r, rec))
			return -1;
		goto again;
	}
	return 1;
}

/* ---- opening -------------------------------------------------------------------------------- */

static int read_header(struct store_trace_reader *r, char *err, size_t errlen)
{
	struct store_trace_record rec;
	const uint8_t *p;
	size_t n;

	if (store_trace_next(r, &rec) != 1 || rec.type != STORE_REC_HEADER) {
		snprintf(err, errlen, "not a cubpf trace (%s)",
			 r->error[0] ? r->error : "no header record at the start");
		return -1;
	}
	p = store_rec_fixed(&rec, &r->header, sizeof(r->header), &n);
	if (!p || memcmp(r->header.magic, STORE_TRACE_MAGIC, 8)) {
		snprintf(err, errlen, "not a cubpf trace (bad header magic)");
		return -1;
	}
	if (r->header.major != STORE_TRACE_MAJOR) {
		snprintf(err, errlen, "trace format version %u.%u; this cubpf reads %u.x",
			 r->header.major, r->header.minor, STORE_TRACE_MAJOR);
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (!(r->hstr[i] = store_rec_string(&p, &n))) {
			snprintf(err, errlen, "damaged trace header (strings)");
			return -1;
		}
	if (n >= sizeof(r->ppid)) /* 1.4; a reader of 1.3 stops at the strings */
		memcpy(&r->ppid, p, sizeof(r->ppid));
	return 0;
}

struct store_trace_reader *store_trace_open_mem(const void *data, size_t size, char *err,
						size_t errlen)
{
	struct store_trace_reader *r = calloc(1, sizeof(*r));
	if (!r || !(r->dctx = ZSTD_createDCtx())) {
		snprintf(err, errlen, "out of memory");
		free(r);
		return NULL;
	}
	r->file = data;
	r->size = size;
	r->fd = -1;
	if (read_header(r, err, errlen)) {
		store_trace_close_reader(r);
		return NULL;
	}
	return r;
}

/* A file mapped whole and read; follow keeps its descriptor for store_trace_refresh. */
static struct store_trace_reader *open_file(const char *path, int follow, char *err, size_t errlen)
{
	struct stat st;
	void *map = NULL;
	int fd = store_file_open(path, 0, &st, err, errlen); /* a FIFO is refused, not waited on */

	if (fd < 0) {
		if (errno == ENOENT)
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(ENOENT));
		return NULL;
	}
	if (st.st_size == 0) {
		snprintf(err, errlen, "%s: empty file", path);
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	struct store_trace_reader *r = store_trace_open_mem(map, (size_t)st.st_size, err, errlen);
	if (!r) {
		munmap(map, (size_t)st.st_size);
		close(fd);
		return NULL;
	}
	r->map = map;
	if (follow)
		r->fd = fd;
	else
		close(fd);
	return r;
}

struct store_trace_reader *store_trace_open(const char *path, char *err, size_t errlen)
{
	return open_file(path, 0, err, errlen);
}

struct store_trace_reader *store_trace_open_follow(const char *path, char *err, size_t errlen)
{
	return open_file(path, 1, err, errlen);
}

/* The end of the file was reached when it ended inside a frame (the writer was writing it) or
 * after whole frames without END (still running): more may have come since.  The reader picks
 * up at the first byte it has not consumed (r->pos): a frame cut short was never consumed, so
 * it is decoded whole now or stays pending again.  A damaged or complete trace is over. */
int store_trace_refresh(struct store_trace_reader *r, char *err, size_t errlen)
{
	struct stat st;
	if (r->fd < 0 || r->state == STORE_TRACE_DAMAGED || r->state == STORE_TRACE_COMPLETE)
		return 0;
	if (fstat(r->fd, &st) != 0) {
		snprintf(err, errlen, "cannot stat the trace: %s", strerror(errno));
		return -1;
	}
	if ((uint64_t)st.st_size <= r->size)
		return 0;
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, r->fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the trace: %s", strerror(errno));
		return -1;
	}
	munmap(r->map, r->size);
	r->map = map;
	r->file = map;
	r->size = (size_t)st.st_size;
	if (r->done) { /* the end it reached is not the end any more */
		r->done = 0;
		r->state = STORE_TRACE_OK;
		r->error[0] = '\0';
	}
	return 1;
}

void store_trace_close_reader(struct store_trace_reader *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->size);
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->raw);
	free(r->xbuf);
	for (int i = 0; i < 3; i++)
		free(r->hstr[i]);
	for (size_t i = 0; i < r->strings_cap; i++)
		free(r->strings[i]);
	free(r->strings);
	store_ids_free(&r->ids);
	free(r);
}

enum store_trace_state store_trace_state(const struct store_trace_reader *r)
{
	return r->state;
}

const char *store_trace_reader_error(const struct store_trace_reader *r)
{
	return r->error;
}

const struct store_rec_header *store_trace_header(const struct store_trace_reader *r)
{
	return &r->header;
}

uint32_t store_trace_parent_pid(const struct store_trace_reader *r)
{
	return r->ppid;
}

const char *store_trace_header_string(const struct store_trace_reader *r, int which)
{
	return which >= 0 && which < 3 ? r->hstr[which] : NULL;
}

const char *store_trace_string(const struct store_trace_reader *r, uint32_t id)
{
	long n = store_ids_find(&r->ids, id);
	return n >= 0 && (size_t)n < r->strings_cap ? r->strings[n] : NULL;
}

void store_trace_reader_sizes(const struct store_trace_reader *r, uint64_t *file_bytes,
			      uint64_t *raw_bytes, uint64_t *frames)
{
	if (file_bytes)
		*file_bytes = r->pos;
	if (raw_bytes)
		*raw_bytes = r->raw_total;
	if (frames)
		*frames = r->frames;
}
