/* tests/vm helpers: test objects, paths, compiling C probe sources with the machine's clang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/vm/tests.h"

static void set_map(struct vm_map_def *m, const char *name, uint32_t type, uint32_t k, uint32_t v,
		    uint32_t n, uint32_t flags, enum vm_map_origin origin)
{
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->type = type, m->key_size = k, m->value_size = v, m->max_entries = n;
	m->flags = flags, m->origin = origin;
}

struct vm_object *test_object(const struct bpf_insn *insns, uint32_t n, enum vm_prog_kind kind,
			      const uint32_t *subprogs, uint32_t nsub)
{
	char err[VM_ERRLEN];
	struct vm_object *obj = vm_object_from_insns(insns, n, kind, err, sizeof(err));
	assert_non_null(obj);
	if (subprogs) {
		free(obj->progs[0].subprogs);
		obj->progs[0].subprogs = malloc(nsub * sizeof(uint32_t));
		assert_non_null(obj->progs[0].subprogs);
		memcpy(obj->progs[0].subprogs, subprogs, nsub * sizeof(uint32_t));
		obj->progs[0].subprog_cnt = nsub;
	}
	obj->maps = calloc(M_COUNT, sizeof(*obj->maps));
	assert_non_null(obj->maps);
	obj->map_cnt = M_COUNT;
	set_map(&obj->maps[M_HASH], "h", CUBPF_MAP_HASH, 4, 8, 16, 0, VM_MAP_USER);
	set_map(&obj->maps[M_ARRAY], "a", CUBPF_MAP_ARRAY, 4, 16, 4, 0, VM_MAP_USER);
	set_map(&obj->maps[M_RODATA], ".rodata", CUBPF_MAP_ARRAY, 4, 16, 1, BPF_F_RDONLY_PROG,
		VM_MAP_RODATA);
	obj->maps[M_RODATA].init = calloc(1, 16);
	assert_non_null(obj->maps[M_RODATA].init);
	memcpy(obj->maps[M_RODATA].init, "hello\0\0\0\x0a\0\0\0\0\0\0\0", 16); /* "hello", then 10 */
	set_map(&obj->maps[M_RING], "rb", CUBPF_MAP_RINGBUF, 0, 0, 4096, 0, VM_MAP_USER);
	set_map(&obj->maps[M_RDONLY], "ro", CUBPF_MAP_ARRAY, 4, 8, 2, BPF_F_RDONLY_PROG, VM_MAP_USER);
	set_map(&obj->maps[M_BSS], ".bss", CUBPF_MAP_ARRAY, 4, 64, 1, 0, VM_MAP_BSS);
	return obj;
}

const char *test_shared_dir(void)
{
	const char *s = getenv("CUBPF_SHARED");
	return s && *s ? s : "../shared";
}

const char *test_build_dir(void)
{
	const char *s = getenv("CUBPF_BUILD");
	return s && *s ? s : "build";
}

uint8_t *test_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	*size = (size_t)n;
	return buf;
}

const char *test_compile(const char *src)
{
	static char out[1024];
	char path[512], cmd[4096];
	const char *clang = getenv("CLANG");
	if (!clang || !*clang)
		clang = "clang";
	if (strchr(src, '/'))
		snprintf(path, sizeof(path), "%s", src);
	else
		snprintf(path, sizeof(path), "tests/vm/progs/%s.bpf.c", src);
	const char *base = strrchr(path, '/') + 1;
	snprintf(out, sizeof(out), "%s/tests/vm-progs", test_build_dir());
	mkdir(out, 0755);
	snprintf(out, sizeof(out), "%s/tests/vm-progs/%.*s.o", test_build_dir(),
		 (int)(strlen(base) - 6), base);
	snprintf(cmd, sizeof(cmd),
		 "%s -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c %s -o %s "
		 "2>%s.log", clang, path, out, out);
	if (system(cmd) != 0)
		fail_msg("cannot compile %s with '%s' (see %s.log): clang -target bpf is needed for "
			 "these tests", path, clang, out);
	return out;
}
