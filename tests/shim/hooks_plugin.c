/* A test plug-in for shim/shim.h, linked into a test copy of libcuda.so.1 (never into the real
 * one) and registered the way live probes are (shim/live/live.c): with CUBPF_TEST_HOOKS=FILE set
 * it installs hooks that write one line per event to FILE,
 * substitute the image of PTX loads that name kern_a (a copy that also has kern_subst), and
 * redirect launches of kern_a to kern_b.  The test reads FILE and what the fake driver got. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/shim.h"

static FILE *out;
static const void *kern_b_handle;

static const char substitute_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry kern_a()\n{\n\tret;\n}\n"
	".visible .entry kern_b()\n{\n\tret;\n}\n"
	".visible .entry kern_subst()\n{\n\tret;\n}\n";

static void module_loading(struct shim_module_event *ev, void *user)
{
	(void)user;
	fprintf(out, "loading %s kind=%d kernels=%u ptx=%u tid=%s\n", ev->api_name, ev->info.kind,
		ev->info.nkernels, ev->info.nptx, ev->tid ? "set" : "zero");
	if (ev->image && ev->info.kind == SHIM_IMAGE_PTX && strstr(ev->image, "kern_a")) {
		ev->image = substitute_ptx;
		ev->info.size = sizeof(substitute_ptx);
	}
}

static void module_loaded(const struct shim_module_event *ev, void *user)
{
	(void)user;
	fprintf(out, "loaded %s result=%d handle=%s substituted=%s time=%s\n", ev->api_name,
		ev->result, ev->module || ev->library ? "set" : "none",
		ev->image == substitute_ptx ? "yes" : "no",
		ev->ts_end >= ev->ts_begin && ev->ts_begin ? "ok" : "bad");
}

static void module_unloaded(shim_module_t module, shim_library_t library, int result, void *user)
{
	(void)user;
	fprintf(out, "unloaded module=%s library=%s result=%d\n", module ? "set" : "none",
		library ? "set" : "none", result);
}

static void kernel_found(const struct shim_kernel_info *k, void *user)
{
	(void)user;
	fprintf(out, "kernel %s id=%u module=%s library=%s\n", k->name, k->kernel_id,
		k->module ? "set" : "none", k->library ? "set" : "none");
	if (!strcmp(k->name, "kern_b"))
		kern_b_handle = k->handle;
}

static void launching(struct shim_launch_event *ev, void *user)
{
	(void)user;
	fprintf(out, "launching %s %s grid=%u,%u,%u block=%u,%u,%u shared=%u\n", ev->api_name,
		ev->kernel ? ev->kernel->name : "?", ev->grid[0], ev->grid[1], ev->grid[2],
		ev->block[0], ev->block[1], ev->block[2], ev->shared_bytes);
	if (ev->kernel && !strcmp(ev->kernel->name, "kern_a") && kern_b_handle)
		ev->func = kern_b_handle;
}

static void launched(const struct shim_launch_event *ev, void *user)
{
	(void)user;
	fprintf(out, "launched %s %s result=%d\n", ev->api_name, ev->kernel ? ev->kernel->name : "?",
		ev->result);
}

static void api_call(const struct shim_api_event *ev, void *user)
{
	(void)user;
	fprintf(out, "api %s kind=%d bytes=%llu result=%d stream=%p time=%s\n", ev->name, ev->kind,
		(unsigned long long)ev->bytes, ev->result, (void *)ev->stream,
		ev->ts_end >= ev->ts_begin && ev->ts_begin ? "ok" : "bad");
}

static void context_ending(const struct shim_context_event *ev, void *user)
{
	(void)user;
	fprintf(out, "context ending how=%d context=%s device=%d\n", ev->how,
		ev->context ? "set" : "none", ev->device);
}

static void context_ended(const struct shim_context_event *ev, void *user)
{
	(void)user;
	fprintf(out, "context ended how=%d context=%s device=%d result=%d\n", ev->how,
		ev->context ? "set" : "none", ev->device, ev->result);
}

static const struct shim_hooks hooks = {
	.module_loading = module_loading,
	.module_loaded = module_loaded,
	.module_unloaded = module_unloaded,
	.kernel_found = kernel_found,
	.launching = launching,
	.launched = launched,
	.api_call = api_call,
	.context_ending = context_ending,
	.context_ended = context_ended,
};

static const struct shim_hooks *start(void)
{
	fprintf(out, "started\n");
	return &hooks;
}

/* A second plug-in of the same library is refused (one per library). */
static const struct shim_hooks *start_second(void)
{
	fprintf(out, "second started\n");
	return NULL;
}

__attribute__((constructor)) static void plugin_register(void)
{
	static const struct shim_plugin plugin = { .name = "test hooks", .start = start };
	static const struct shim_plugin second = { .name = "second", .start = start_second };
	const char *path = getenv("CUBPF_TEST_HOOKS");
	if (!path || !(out = fopen(path, "w")))
		return;
	setvbuf(out, NULL, _IOLBF, 0);
	if (shim_plugin_register(&plugin) != 0)
		fprintf(out, "register refused\n");
	if (shim_plugin_register(&second) == 0)
		fprintf(out, "second registered\n");
}
