/* cubpf ptx: instruments a PTX file offline with the GPU programs of a probe object, so that
 * the result can be read, assembled with ptxas, or loaded by a test harness. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "ptx-rewriter/ptx.h"
#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/vm.h"

static void ptx_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf ptx -p PROG.bpf.o [-k KERNEL_GLOB] [-e] [-S] [-o OUT.ptx] IN.ptx\n"
		"\n"
		"Injects the GPU programs (kprobe/, kretprobe/, memprobe/, blockprobe/, blockretprobe/,\n"
		"syncprobe/, fentry/, fexit/, bbprobe/, bbretprobe/) of PROG.bpf.o into the kernels and\n"
		"device functions of IN.ptx and writes the result to OUT.ptx\n"
		"(standard output when -o is absent or '-').\n"
		"Each program applies to the kernels its section's glob matches (mangled or demangled\n"
		"name); -k narrows the kernels further.  Programs are verified first.  Kernels no\n"
		"program applies to are copied byte for byte.  A summary goes to standard error.\n"
		"\n"
		"  -p, --prog PROG.bpf.o   probe object (clang -O2 -g -target bpf)\n"
		"  -k, --kernel GLOB       only kernels matching GLOB (fnmatch; e.g. 'vec_add*')\n"
		"  -e, --enable-words      probes read their enable word (__cubpf_enable, see\n"
		"                          ptx-rewriter/layout.h) and skip when their bit is 0\n"
		"  -S, --no-shared         add no shared memory to kernels, as the shim with\n"
		"                          CUBPF_SHARED_SUMS=0 (block ends use the block table)\n"
		"  -o, --output OUT.ptx    output file\n"
		"  -h, --help              this text\n"
		"\n"
		"Device maps: the output declares '.const .u64 __cubpf_map_<i>' for each map i the\n"
		"probes use; whoever loads it must store the device address of map i's storage there.\n");
}

/* The PTX to rewrite, NUL-terminated; NULL with the reason in err (a FIFO is refused, not
 * waited on). */
static char *read_all(const char *path, size_t *len, char *err, size_t errlen)
{
	uint8_t *d = cubin_file_read(path, (size_t)1 << 31, len, err, errlen);
	uint8_t *t = d ? realloc(d, *len + 1) : NULL;
	if (!t) {
		if (d)
			snprintf(err, errlen, "%s: out of memory", path);
		free(d);
		return NULL;
	}
	t[*len] = 0;
	return (char *)t;
}

/* Verifies the GPU programs and lists them for the rewriter. */
static int gpu_progs(struct vm_object *obj, struct ptx_prog *progs, uint32_t *cnt)
{
	*cnt = 0;
	for (uint32_t i = 0; i < obj->prog_cnt; i++) {
		const struct vm_prog *p = &obj->progs[i];
		if (!vm_kind_is_gpu(p->kind))
			continue;
		char log[2048];
		if (vm_verify_sanitize(obj, i, NULL, NULL, log, sizeof(log))) {
			tool_warn("cubpf ptx: program %s (%s) rejected by the verifier:", p->name,
				  p->section);
			tool_text_put(stderr, log, 1);
			fputc('\n', stderr);
			return -1;
		}
		progs[(*cnt)++] = (struct ptx_prog){.name = p->name, .kind = p->kind,
						    .attach = p->attach, .insns = p->insns,
						    .insn_cnt = p->insn_cnt};
	}
	return 0;
}

static int write_out(const char *path, const char *text, size_t len)
{
	FILE *f = path && strcmp(path, "-") ? fopen(path, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "cubpf ptx: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	bool ok = fwrite(text, 1, len, f) == len;
	ok &= f == stdout ? fflush(f) == 0 : fclose(f) == 0;
	if (!ok)
		fprintf(stderr, "cubpf ptx: write error on %s\n", path ? path : "stdout");
	return ok ? 0 : -1;
}

static int instrument(const char *prog_path, const char *in_path, const char *out_path,
		      const char *glob, bool enable_words, bool no_shared)
{
	char err[PTX_ERRLEN];
	struct vm_object *obj;
	if (vm_object_load_file(prog_path, &obj, err, sizeof(err))) {
		tool_warn("cubpf ptx: %s: %s", prog_path, err);
		return 1;
	}
	size_t len = 0;
	char why[CUBIN_ERRLEN + 4096];
	char *text = read_all(in_path, &len, why, sizeof(why));
	struct ptx_prog *progs = calloc(obj->prog_cnt + 1, sizeof(*progs));
	uint32_t cnt = 0;
	int rc = 1;
	if (!text) {
		fprintf(stderr, "cubpf ptx: %s\n", why);
	} else if (progs && !gpu_progs(obj, progs, &cnt)) {
		if (!cnt)
			fprintf(stderr, "cubpf ptx: warning: %s has no GPU program\n",
				prog_path);
		struct ptx_inject_opts o = {.progs = progs, .prog_cnt = cnt, .maps = obj->maps,
					    .map_cnt = obj->map_cnt, .kernel_glob = glob,
					    .enable_words = enable_words, .no_shared = no_shared};
		struct ptx_inject_report rep;
		char *out;
		size_t out_len;
		if (ptx_instrument(text, len, &o, &out, &out_len, &rep, err, sizeof(err))) {
			tool_warn("cubpf ptx: %s: %s", in_path, err); /* may quote the PTX */
		} else {
			rc = write_out(out_path, out, out_len) ? 1 : 0;
			fprintf(stderr,
				"cubpf ptx: %u of %u kernels instrumented (+%u device functions): %u entry, "
				"%u exit, %u memory, %u thread block, %u barrier/fence, %u function entry, "
				"%u function return, %u basic block probe sites (%u programs, %u maps)\n",
				rep.instrumented, rep.kernels, rep.funcs, rep.entry_sites, rep.exit_sites,
				rep.mem_sites, rep.block_sites, rep.sync_sites, rep.fentry_sites,
				rep.fexit_sites, rep.bb_sites, cnt, obj->map_cnt);
			free(out);
		}
	}
	free(progs);
	free(text);
	vm_object_free(obj);
	return rc;
}

int cmd_ptx(int argc, char **argv)
{
	static const struct option opts[] = {
		{"prog", required_argument, NULL, 'p'}, {"kernel", required_argument, NULL, 'k'},
		{"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
		{"enable-words", no_argument, NULL, 'e'}, {"no-shared", no_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	const char *prog = NULL, *out = NULL, *glob = NULL;
	bool enable = false, no_shared = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:k:o:heS", opts, NULL)) != -1) {
		switch (c) {
		case 'p': prog = optarg; break;
		case 'k': glob = optarg; break;
		case 'o': out = optarg; break;
		case 'e': enable = true; break;
		case 'S': no_shared = true; break;
		case 'h': ptx_usage(stdout); return 0;
		default: ptx_usage(stderr); return 2;
		}
	}
	if (!prog || optind != argc - 1) {
		fprintf(stderr, "cubpf ptx: %s\n", !prog ? "-p PROG.bpf.o is required"
							  : "exactly one input PTX file is required");
		ptx_usage(stderr);
		return 2;
	}
	return instrument(prog, argv[optind], out, glob, enable, no_shared);
}
