/* Small shared pieces: error formatting, program kinds, raw objects, the runtime's lifetime. */
#include <stdlib.h>
#include <string.h>

#include "vm/internal.h"

void vm_errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const struct {
	const char *prefix;
	enum vm_prog_kind kind;
} kinds[] = {
	{"kprobe/", VM_PROG_KPROBE},     {"kretprobe/", VM_PROG_KRETPROBE},
	{"memprobe/", VM_PROG_MEMPROBE}, {"uprobe/", VM_PROG_UPROBE},
	{"uretprobe/", VM_PROG_URETPROBE},
	{"blockprobe/", VM_PROG_BLOCKPROBE}, {"blockretprobe/", VM_PROG_BLOCKRETPROBE},
	{"syncprobe/", VM_PROG_SYNCPROBE},
	{"fentry/", VM_PROG_FENTRY},     {"fexit/", VM_PROG_FEXIT},
	{"bbprobe/", VM_PROG_BBPROBE},   {"bbretprobe/", VM_PROG_BBRETPROBE},
};

int vm_prog_kind_from_section(const char *section, const char **attach)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(kinds[i].prefix);
		if (!strncmp(section, kinds[i].prefix, n) && section[n]) {
			if (attach)
				*attach = section + n;
			return kinds[i].kind;
		}
	}
	return -1;
}

const char *vm_prog_kind_name(enum vm_prog_kind kind)
{
	static const char *const names[] = {"kprobe", "kretprobe", "memprobe", "uprobe",
					    "uretprobe", "raw", "blockprobe", "blockretprobe",
					    "syncprobe", "fentry", "fexit", "bbprobe", "bbretprobe"};
	_Static_assert(sizeof(names) / sizeof(names[0]) == VM_PROG_KIND_COUNT, "a kind without a name");
	return (unsigned)kind < VM_PROG_KIND_COUNT ? names[kind] : "unknown";
}

struct vm_object *vm_object_from_insns(const struct bpf_insn *insns, uint32_t cnt,
				       enum vm_prog_kind kind, char *err, size_t errlen)
{
	struct vm_object *obj = calloc(1, sizeof(*obj));
	struct vm_prog *p = calloc(1, sizeof(*p));
	if (obj) {
		obj->progs = p;
		obj->prog_cnt = p ? 1 : 0;
	}
	if (!obj || !p || !(p->insns = malloc(sizeof(*insns) * (cnt ? cnt : 1))) ||
	    !(p->subprogs = calloc(1, sizeof(uint32_t)))) {
		vm_errf(err, errlen, "out of memory");
		vm_object_free(obj);
		if (!obj)
			free(p);
		return NULL;
	}
	if (cnt)
		memcpy(p->insns, insns, sizeof(*insns) * cnt);
	p->insn_cnt = cnt;
	p->subprog_cnt = 1;
	p->kind = kind;
	snprintf(p->name, sizeof(p->name), "prog");
	snprintf(p->section, sizeof(p->section), "%s", vm_prog_kind_name(kind));
	snprintf(obj->name, sizeof(obj->name), "memory");
	return obj;
}

void vm_object_free(struct vm_object *obj)
{
	if (!obj)
		return;
	for (uint32_t i = 0; obj->progs && i < obj->prog_cnt; i++) {
		free(obj->progs[i].insns);
		free(obj->progs[i].subprogs);
	}
	for (uint32_t i = 0; obj->maps && i < obj->map_cnt; i++)
		free(obj->maps[i].init);
	free(obj->progs);
	free(obj->maps);
	free(obj);
}

struct vm_runtime *vm_runtime_new(const struct vm_object *obj, char *err, size_t errlen)
{
	struct vm_runtime *rt = calloc(1, sizeof(*rt));
	if (!rt) {
		vm_errf(err, errlen, "out of memory");
		return NULL;
	}
	rt->obj = obj;
	if (err && errlen)
		err[0] = 0;
	if (vm_maps_create(rt, err, errlen) < 0) {
		vm_runtime_free(rt);
		return NULL;
	}
	return rt;
}

void vm_runtime_free(struct vm_runtime *rt)
{
	if (!rt)
		return;
	vm_maps_destroy(rt);
	free(rt);
}

void vm_runtime_set_output(struct vm_runtime *rt, const struct vm_output *out)
{
	rt->out = *out;
}

/* The conformance suite's helper 5: returns its argument and stops the program when it is 0. */
static uint64_t unwind_helper(void *env, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
			      uint64_t r5)
{
	(void)r2, (void)r3, (void)r4, (void)r5;
	if (r1 == 0)
		vm_exec_stop(env);
	return r1;
}

int vm_run_raw(const void *code, size_t code_len, void *mem, size_t mem_len, uint64_t *r0,
	       char *err, size_t errlen)
{
	if (code_len == 0 || code_len % 8 || code_len / 8 > VM_MAX_INSNS) {
		vm_errf(err, errlen, "program size %zu is not a positive multiple of 8 bytes", code_len);
		return -1;
	}
	struct vm_object *obj = vm_object_from_insns(code, (uint32_t)(code_len / 8), VM_PROG_RAW,
						     err, errlen);
	struct vm_runtime *rt = obj ? vm_runtime_new(obj, err, errlen) : NULL;
	struct vm_exec *ex = rt ? vm_exec_new(rt, 0, err, errlen) : NULL;
	int rc = -1;
	if (ex) {
		vm_exec_set_checked(ex, true);
		vm_exec_set_helper(ex, 5, unwind_helper);
		rc = vm_exec_run(ex, mem, mem_len, r0, err, errlen);
	}
	vm_exec_free(ex);
	vm_runtime_free(rt);
	vm_object_free(obj);
	return rc;
}
