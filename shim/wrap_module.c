/* shim/wrap_module.c: module loads and kernel handles.
 *
 * Every load entry point reports one event before the real call (where a hook may substitute
 * the image) and one after it (with the resulting handle).  Handle look-ups register which
 * CUfunction / CUkernel is which kernel of which module, so that launches can name them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin/cubin.h"
#include "shim/internal.h"

/* The hooks, or NULL when nothing listens (then loads cost one extra branch). */
static const struct shim_hooks *hooks(void)
{
	return atomic_load_explicit(&shim_hooks_now, memory_order_acquire);
}

static int describing(const struct shim_hooks *h)
{
	return h || shim_log_enabled(SHIM_LOG_INFO);
}

/* A file load (cuModuleLoad, cuLibraryLoadFromFile, cuLinkAddFile): what the file holds. */
static void describe_file(const char *path, struct shim_image_info *info)
{
	info->kind = SHIM_IMAGE_FILE;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			shim_image_describe(map, (size_t)st.st_size, info);
			munmap(map, (size_t)st.st_size);
			if (!info->readable)
				info->kind = SHIM_IMAGE_FILE;
		}
	}
	close(fd);
}

/* A file load under hooks that may substitute modules: the file's bytes (NUL-terminated, for
 * PTX), so that the hooks can look at them like a data load's; NULL when the file cannot be
 * read, and the driver then reads it itself as always. */
static void *read_image_file(const struct shim_hooks *h, const char *path, size_t *size)
{
	*size = 0;
	if (!h || !h->module_loading || !path)
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (uint64_t)st.st_size < (1ull << 32) && (buf = malloc((size_t)st.st_size + 1))) {
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got == (size_t)st.st_size) {
			buf[got] = 0;
			*size = got;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	close(fd);
	return buf;
}

static void load_begin(struct shim_module_event *ev, const struct shim_hooks *h,
		       enum shim_load_api api, const char *name, const void *image,
		       const char *path, size_t size, void *link_state)
{
	memset(ev, 0, sizeof(*ev));
	ev->link_state = link_state;
	ev->api = api;
	ev->api_name = name;
	ev->image = image;
	ev->path = path;
	ev->tid = shim_tid();
	if (describing(h)) {
		if (image)
			shim_image_describe_open(image, size, &ev->info,
						 h && h->module_loading ? &ev->opened : NULL);
		else if (path && api != SHIM_LOAD_LINK_DATA) /* (a link input's name is a label) */
			describe_file(path, &ev->info);
	}
	ev->ts_begin = shim_now_ns();
	if (h && h->module_loading)
		h->module_loading(ev, h->user);
	cubin_image_free(ev->opened); /* (it points into the application's bytes) */
	ev->opened = NULL;
}

static CUresult load_end(struct shim_module_event *ev, const struct shim_hooks *h, CUresult r)
{
	ev->ts_end = shim_now_ns();
	ev->result = r;
	shim_report_load(ev);
	if (h && h->module_loaded)
		h->module_loaded(ev, h->user);
	return r;
}

/* The driver refused a substituted image (instrumented code it cannot load): the hooks hear of
 * the failure, then the caller loads the original, so that the application never sees cubpf's
 * failure.  Returns 1 when the caller must retry with ev->image (now the original). */
static int substitute_refused(struct shim_module_event *ev, const struct shim_hooks *h,
			      const void *original, CUresult r)
{
	if (r == CUDA_SUCCESS || ev->image == original)
		return 0;
	ev->ts_end = shim_now_ns();
	ev->result = r;
	if (h && h->module_loaded)
		h->module_loaded(ev, h->user);
	ev->image = original;
	if (describing(h))
		shim_image_describe(original, 0, &ev->info);
	return 1;
}

#define PASS_THROUGH_IF_DISABLED(name, args)                                                      \
	do {                                                                                      \
		shim_ensure_init();                                                               \
		if (shim_state.disabled)                                                          \
			return SHIM_REAL(name) args;                                              \
	} while (0)

SHIM_API_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	PASS_THROUGH_IF_DISABLED(cuModuleLoad, (module, fname));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	size_t size;
	void *file = read_image_file(h, fname, &size);
	load_begin(&ev, h, SHIM_LOAD_MODULE_LOAD, "cuModuleLoad", file, fname, size, NULL);
	CUresult r;
	if (ev.image != file) { /* substituted: the driver gets the instrumented image */
		r = SHIM_REAL(cuModuleLoadData)(module, ev.image);
		if (substitute_refused(&ev, h, file, r))
			r = SHIM_REAL(cuModuleLoad)(module, ev.path);
	} else {
		r = SHIM_REAL(cuModuleLoad)(module, ev.path);
	}
	ev.module = r == CUDA_SUCCESS && module ? (shim_module_t)*module : NULL;
	r = load_end(&ev, h, r);
	free(file);
	return r;
}

SHIM_API_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	PASS_THROUGH_IF_DISABLED(cuModuleLoadData, (module, image));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	load_begin(&ev, h, SHIM_LOAD_MODULE_DATA, "cuModuleLoadData", image, NULL, 0, NULL);
	CUresult r = SHIM_REAL(cuModuleLoadData)(module, ev.image);
	if (substitute_refused(&ev, h, image, r))
		r = SHIM_REAL(cuModuleLoadData)(module, ev.image);
	ev.module = r == CUDA_SUCCESS && module ? (shim_module_t)*module : NULL;
	return load_end(&ev, h, r);
}

SHIM_API_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
					    CUjit_option *options, void **values)
{
	PASS_THROUGH_IF_DISABLED(cuModuleLoadDataEx, (module, image, n, options, values));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	load_begin(&ev, h, SHIM_LOAD_MODULE_DATA_EX, "cuModuleLoadDataEx", image, NULL, 0, NULL);
	CUresult r = SHIM_REAL(cuModuleLoadDataEx)(module, ev.image, n, options, values);
	if (substitute_refused(&ev, h, image, r))
		r = SHIM_REAL(cuModuleLoadDataEx)(module, ev.image, n, options, values);
	ev.module = r == CUDA_SUCCESS && module ? (shim_module_t)*module : NULL;
	return load_end(&ev, h, r);
}

SHIM_API_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	PASS_THROUGH_IF_DISABLED(cuModuleLoadFatBinary, (module, fatCubin));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	load_begin(&ev, h, SHIM_LOAD_MODULE_FATBINARY, "cuModuleLoadFatBinary", fatCubin, NULL, 0,
		   NULL);
	CUresult r = SHIM_REAL(cuModuleLoadFatBinary)(module, ev.image);
	if (substitute_refused(&ev, h, fatCubin, r))
		r = SHIM_REAL(cuModuleLoadFatBinary)(module, ev.image);
	ev.module = r == CUDA_SUCCESS && module ? (shim_module_t)*module : NULL;
	return load_end(&ev, h, r);
}

SHIM_API_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
					   CUjit_option *jitOptions, void **jitOptionsValues,
					   unsigned int numJitOptions, CUlibraryOption *libraryOptions,
					   void **libraryOptionValues, unsigned int numLibraryOptions)
{
	PASS_THROUGH_IF_DISABLED(cuLibraryLoadData,
				 (library, code, jitOptions, jitOptionsValues, numJitOptions,
				  libraryOptions, libraryOptionValues, numLibraryOptions));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	load_begin(&ev, h, SHIM_LOAD_LIBRARY_DATA, "cuLibraryLoadData", code, NULL, 0, NULL);
	CUresult r = SHIM_REAL(cuLibraryLoadData)(library, ev.image, jitOptions, jitOptionsValues,
						  numJitOptions, libraryOptions,
						  libraryOptionValues, numLibraryOptions);
	if (substitute_refused(&ev, h, code, r))
		r = SHIM_REAL(cuLibraryLoadData)(library, ev.image, jitOptions, jitOptionsValues,
						 numJitOptions, libraryOptions, libraryOptionValues,
						 numLibraryOptions);
	ev.library = r == CUDA_SUCCESS && library ? (shim_library_t)*library : NULL;
	return load_end(&ev, h, r);
}

SHIM_API_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
					       CUjit_option *jitOptions, void **jitOptionsValues,
					       unsigned int numJitOptions,
					       CUlibraryOption *libraryOptions,
					       void **libraryOptionValues,
					       unsigned int numLibraryOptions)
{
	PASS_THROUGH_IF_DISABLED(cuLibraryLoadFromFile,
				 (library, fileName, jitOptions, jitOptionsValues, numJitOptions,
				  libraryOptions, libraryOptionValues, numLibraryOptions));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	size_t size;
	void *file = read_image_file(h, fileName, &size);
	load_begin(&ev, h, SHIM_LOAD_LIBRARY_FILE, "cuLibraryLoadFromFile", file, fileName, size,
		   NULL);
	CUresult r = CUDA_ERROR_UNKNOWN;
	if (ev.image != file) /* substituted: the driver gets the instrumented image */
		r = SHIM_REAL(cuLibraryLoadData)(library, ev.image, jitOptions, jitOptionsValues,
						 numJitOptions, libraryOptions,
						 libraryOptionValues, numLibraryOptions);
	if (ev.image == file || substitute_refused(&ev, h, file, r))
		r = SHIM_REAL(cuLibraryLoadFromFile)(library, ev.path, jitOptions,
						     jitOptionsValues, numJitOptions,
						     libraryOptions, libraryOptionValues,
						     numLibraryOptions);
	ev.library = r == CUDA_SUCCESS && library ? (shim_library_t)*library : NULL;
	r = load_end(&ev, h, r);
	free(file);
	return r;
}

/* ---- unloads ------------------------------------------------------------------------------ */

static CUresult unloaded(shim_module_t module, shim_library_t library, CUresult r)
{
	const struct shim_hooks *h = hooks();
	shim_report_unload(r);
	if (h && h->module_unloaded)
		h->module_unloaded(module, library, r, h->user);
	return r;
}

SHIM_API_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
	PASS_THROUGH_IF_DISABLED(cuModuleUnload, (hmod));
	return unloaded((shim_module_t)hmod, NULL, SHIM_REAL(cuModuleUnload)(hmod));
}

SHIM_API_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
	PASS_THROUGH_IF_DISABLED(cuLibraryUnload, (library));
	return unloaded(NULL, (shim_library_t)library, SHIM_REAL(cuLibraryUnload)(library));
}

/* ---- linker inputs and output ------------------------------------------------------------ */

/* cuLinkAddData and its _v2 share a prototype; `idx` says which real one to call. */
static CUresult link_add_data(unsigned idx, const char *api, CUlinkState state,
			      CUjitInputType type, void *data, size_t size, const char *name,
			      unsigned int n, CUjit_option *options, void **values)
{
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	load_begin(&ev, h, SHIM_LOAD_LINK_DATA, api, data, name, size, state);
	__typeof__(&cuLinkAddData_v2) add = (__typeof__(&cuLinkAddData_v2))shim_slots[idx];
	CUresult r = add(state, type, (void *)ev.image, ev.image == data ? size : ev.info.size, name,
			 n, options, values);
	/* The driver compiles a PTX input when it is added: an instrumented one it refuses is
	 * replaced by the original now, while the link can still take it. */
	if (substitute_refused(&ev, h, data, r))
		r = add(state, type, data, size, name, n, options, values);
	return load_end(&ev, h, r);
}

static CUresult link_add_file(unsigned idx, const char *api, CUlinkState state,
			      CUjitInputType type, const char *path, unsigned int n,
			      CUjit_option *options, void **values)
{
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	size_t size = 0;
	/* A PTX file may be instrumented like data: the hooks get its bytes. */
	void *file = type == CU_JIT_INPUT_PTX ? read_image_file(h, path, &size) : NULL;
	load_begin(&ev, h, SHIM_LOAD_LINK_FILE, api, file, path, size, state);
	CUresult r = CUDA_ERROR_UNKNOWN;
	if (ev.image != file) /* substituted: the linker gets the instrumented text as data */
		r = SHIM_REAL(cuLinkAddData_v2)(state, type, (void *)ev.image, ev.info.size, path, n,
						options, values);
	if (ev.image == file || substitute_refused(&ev, h, file, r))
		r = ((__typeof__(&cuLinkAddFile_v2))shim_slots[idx])(state, type, ev.path, n,
								      options, values);
	r = load_end(&ev, h, r);
	free(file);
	return r;
}

#define LINK_ADD_DATA(fn)                                                                         \
	SHIM_API_EXPORT CUresult fn(CUlinkState state, CUjitInputType type, void *data,           \
				    size_t size, const char *name, unsigned int n,                \
				    CUjit_option *options, void **values)                         \
	{                                                                                         \
		PASS_THROUGH_IF_DISABLED(fn, (state, type, data, size, name, n, options, values)); \
		return link_add_data(SHIM_IDX_##fn, #fn, state, type, data, size, name, n,        \
				     options, values);                                            \
	}
#define LINK_ADD_FILE(fn)                                                                         \
	SHIM_API_EXPORT CUresult fn(CUlinkState state, CUjitInputType type, const char *path,     \
				    unsigned int n, CUjit_option *options, void **values)         \
	{                                                                                         \
		PASS_THROUGH_IF_DISABLED(fn, (state, type, path, n, options, values));            \
		return link_add_file(SHIM_IDX_##fn, #fn, state, type, path, n, options, values);  \
	}

LINK_ADD_DATA(cuLinkAddData)
LINK_ADD_DATA(cuLinkAddData_v2)
LINK_ADD_FILE(cuLinkAddFile)
LINK_ADD_FILE(cuLinkAddFile_v2)

SHIM_API_EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	PASS_THROUGH_IF_DISABLED(cuLinkComplete, (state, cubinOut, sizeOut));
	const struct shim_hooks *h = hooks();
	struct shim_module_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.api = SHIM_LOAD_LINK_COMPLETE;
	ev.api_name = "cuLinkComplete";
	ev.link_state = state;
	ev.tid = shim_tid();
	ev.ts_begin = shim_now_ns();
	CUresult r = SHIM_REAL(cuLinkComplete)(state, cubinOut, sizeOut);
	if (r == CUDA_SUCCESS && cubinOut && *cubinOut) {
		ev.image = *cubinOut;
		if (describing(h))
			shim_image_describe(ev.image, sizeOut ? *sizeOut : 0, &ev.info);
		ev.info.kind = SHIM_IMAGE_LINKED;
	}
	return load_end(&ev, h, r);
}

/* ---- kernel handles ---------------------------------------------------------------------- */

static void found(const struct shim_kernel_info *k)
{
	const struct shim_hooks *h = hooks();
	if (k && h && h->kernel_found)
		h->kernel_found(k, h->user);
	if (k)
		shim_log(SHIM_LOG_DEBUG, "kernel %s = %p (module %p, library %p)", k->name, k->handle,
			 (void *)k->module, (void *)k->library);
}

SHIM_API_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	PASS_THROUGH_IF_DISABLED(cuModuleGetFunction, (hfunc, hmod, name));
	CUresult r = SHIM_REAL(cuModuleGetFunction)(hfunc, hmod, name);
	if (r == CUDA_SUCCESS && hfunc)
		found(shim_kernel_register(*hfunc, (shim_module_t)hmod, NULL, name));
	return r;
}

SHIM_API_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	PASS_THROUGH_IF_DISABLED(cuLibraryGetKernel, (pKernel, library, name));
	CUresult r = SHIM_REAL(cuLibraryGetKernel)(pKernel, library, name);
	if (r == CUDA_SUCCESS && pKernel)
		found(shim_kernel_register(*pKernel, NULL, (shim_library_t)library, name));
	return r;
}

SHIM_API_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	PASS_THROUGH_IF_DISABLED(cuKernelGetFunction, (pFunc, kernel));
	CUresult r = SHIM_REAL(cuKernelGetFunction)(pFunc, kernel);
	if (r == CUDA_SUCCESS && pFunc)
		shim_kernel_alias(*pFunc, kernel, NULL);
	return r;
}

SHIM_API_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	PASS_THROUGH_IF_DISABLED(cuLibraryGetModule, (pMod, library));
	CUresult r = SHIM_REAL(cuLibraryGetModule)(pMod, library);
	if (r == CUDA_SUCCESS && pMod)
		shim_log(SHIM_LOG_DEBUG, "library %p is module %p", (void *)library, (void *)*pMod);
	return r;
}

struct shim_kernel_info *shim_kernel_discover(const void *handle)
{
	const char *name = NULL;
	CUmodule mod = NULL;
	if (!handle)
		return NULL;
	if (SHIM_REAL(cuFuncGetName)(&name, (CUfunction)handle) != CUDA_SUCCESS || !name)
		return shim_kernel_mark_unknown(handle);
	if (SHIM_REAL(cuFuncGetModule)(&mod, (CUfunction)handle) != CUDA_SUCCESS)
		mod = NULL;
	struct shim_kernel_info *k = shim_kernel_register(handle, (shim_module_t)mod, NULL, name);
	found(k);
	return k ? k : shim_kernel_mark_unknown(handle);
}
