/* cubpf cdi: prints a CDI (Container Device Interface) spec that puts cubpf into containers, and
 * cubpf cdi-hook: the OCI createContainer hook that spec names.
 *
 * The spec has one device, cubpf.dev/layer=cubpf, whose edits mount cubpf's install prefix
 * (where this binary lives: PREFIX/bin/cubpf, or --prefix) read-only at --container-path
 * (/opt/cubpf), and make every program of the container load cubpf's libcuda.so.1 without
 * replacing any of the image's variables.  A CDI env entry replaces a variable of the same name,
 * so LD_LIBRARY_PATH (which CUDA images set) is never touched: the default is a createContainer
 * hook, `PREFIX/bin/cubpf cdi-hook --preload LIB...`, that adds cubpf's libraries to the
 * container's /etc/ld.so.preload (in the container's own writable layer: the image is not
 * changed); the dynamic linker then loads them first in every process, whatever the image's
 * LD_LIBRARY_PATH and LD_PRELOAD say, and answers each later request for the soname
 * libcuda.so.1 (dlopen, DT_NEEDED) with cubpf's.  --env instead sets LD_PRELOAD (no hook: for
 * runtimes that do not run CDI hooks), which replaces an LD_PRELOAD the image sets (CUDA images
 * set none) and does not reach programs that clear their environment.  CUBPF_* variables are in
 * the spec only when options ask for them (--probe, --trace, --log).
 *
 * The hook runs as root on the host, before the container starts, on a root file system the
 * image made: it resolves nothing through the image's symbolic links (etc/ and ld.so.preload
 * are opened with O_NOFOLLOW from the root folder's descriptor), so that an image cannot turn
 * the write into one on the host. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tools/tools.h"

#define CDI_VERSION "1.1.0" /* the current CDI spec; mounts, hooks and env exist since 0.3.0 */
#define CDI_KIND "cubpf.dev/layer"
#define CDI_DEVICE "cubpf"
#define MAX_PROBES 16

/* What is preloaded, in this order: as `cubpf run --preload` does (tools/cmd_run.c). */
static const char *const preload_libs[] = {"libnvrtc.so.13", "libnvJitLink.so.13", "libcuda.so.1",
					   "libcubpf-exit.so"};

struct cdi_opts {
	char prefix[PATH_MAX];
	const char *container_path;
	const char *cdi_version;
	const char *probe[MAX_PROBES];
	int nprobe;
	const char *trace;
	const char *log;
	int env_mode;
	const char *lib, *probes; /* the prefix's folders: lib, probes (dist, build tree) or
				   * lib/cubpf, lib/cubpf/probes (make install) */
};

static void cdi_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf cdi [OPTIONS] > /etc/cdi/cubpf.json\n"
		"\n"
		"Prints a CDI spec (JSON) with one device, " CDI_KIND "=" CDI_DEVICE ", that mounts\n"
		"cubpf's install prefix read-only into a container and makes its programs load\n"
		"cubpf's libcuda.so.1: a createContainer hook (PREFIX/bin/cubpf cdi-hook) adds it to\n"
		"the container's /etc/ld.so.preload.  The image's LD_LIBRARY_PATH and LD_PRELOAD are\n"
		"left as they are.  Use: docker run --device " CDI_KIND "=" CDI_DEVICE " ... (with the\n"
		"NVIDIA GPUs as usual).\n"
		"\n"
		"options:\n"
		"      --prefix DIR          cubpf's prefix on the host (default: the one this cubpf\n"
		"                            runs from)\n"
		"      --container-path DIR  where it is mounted in the container (default /opt/cubpf)\n"
		"      --env                 set LD_PRELOAD instead of the hook (for runtimes without\n"
		"                            CDI hooks; replaces an LD_PRELOAD the image sets)\n"
		"      --probe TOOL|OBJ      probe every container program with a bundled tool's probe\n"
		"                            (kcount, ...) or a probe object (mounted read-only);\n"
		"                            repeatable (CUBPF_PROGRAMS)\n"
		"      --trace DIR           write traces into host folder DIR, one per process\n"
		"                            (mounted at /run/cubpf/trace; CUBPF_TRACE)\n"
		"      --log LEVEL           CUBPF_LOG in the container\n"
		"      --cdi-version V       the spec's cdiVersion (default " CDI_VERSION "; 0.6.0 for\n"
		"                            engines with an older CDI library)\n"
		"  -h, --help                this text\n");
}

/* ---- the spec -------------------------------------------------------------------------------- */
static void mount_entry(FILE *f, const char *host, const char *container, int rw, int *first)
{
	fprintf(f, "%s\n          {\"hostPath\": ", *first ? "" : ",");
	tool_json_string(f, host);
	fprintf(f, ", \"containerPath\": ");
	tool_json_string(f, container);
	fprintf(f, ", \"options\": [\"%s\", \"nosuid\", \"nodev\", \"bind\"]}", rw ? "rw" : "ro");
	*first = 0;
}

/* The container path of probe i: a bundled tool's object inside the mounted prefix, a file of
 * the user's mounted under /run/cubpf/probes. */
static void probe_paths(const struct cdi_opts *o, int i, char *host, char *container, size_t len)
{
	const char *p = o->probe[i];
	if (!strchr(p, '/') && !strstr(p, ".bpf.o")) {
		snprintf(host, len, "%s", "");
		snprintf(container, len, "%s/%s/%s.bpf.o", o->container_path, o->probes, p);
		return;
	}
	const char *base = strrchr(p, '/');
	snprintf(host, len, "%s", p);
	snprintf(container, len, "/run/cubpf/probes/%d-%s", i, base ? base + 1 : p);
}

static void print_env(FILE *f, const struct cdi_opts *o)
{
	char v[8192] = "", host[PATH_MAX], cont[PATH_MAX + 64];
	int first = 1;
	if (!o->env_mode && !o->nprobe && !o->trace && !o->log)
		return; /* nothing: the image's variables as they are */
	fprintf(f, "        \"env\": [");
	if (o->env_mode) {
		snprintf(v, sizeof(v), "LD_PRELOAD=");
		for (size_t i = 0; i < sizeof(preload_libs) / sizeof(*preload_libs); i++)
			snprintf(v + strlen(v), sizeof(v) - strlen(v), "%s%s/%s/%s", i ? ":" : "",
				 o->container_path, o->lib, preload_libs[i]);
		fprintf(f, "\n          ");
		tool_json_string(f, v);
		first = 0;
	}
	if (o->nprobe) {
		snprintf(v, sizeof(v), "CUBPF_PROGRAMS=");
		for (int i = 0; i < o->nprobe; i++) {
			probe_paths(o, i, host, cont, sizeof(host));
			snprintf(v + strlen(v), sizeof(v) - strlen(v), "%s%s", i ? ":" : "", cont);
		}
		fprintf(f, "%s\n          ", first ? "" : ",");
		tool_json_string(f, v);
		first = 0;
	}
	if (o->trace) {
		fprintf(f, "%s\n          \"CUBPF_TRACE=/run/cubpf/trace/\"", first ? "" : ",");
		first = 0;
	}
	if (o->log) {
		snprintf(v, sizeof(v), "CUBPF_LOG=%s", o->log);
		fprintf(f, "%s\n          ", first ? "" : ",");
		tool_json_string(f, v);
		first = 0;
	}
	fprintf(f, "\n        ],\n");
}

static void print_hooks(FILE *f, const struct cdi_opts *o)
{
	char path[PATH_MAX + 16], lib[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/bin/cubpf", o->prefix);
	fprintf(f, ",\n        \"hooks\": [\n          {\"hookName\": \"createContainer\", \"path\": ");
	tool_json_string(f, path);
	fprintf(f, ",\n           \"args\": [\"cubpf\", \"cdi-hook\", \"--preload\"");
	for (size_t i = 0; i < sizeof(preload_libs) / sizeof(*preload_libs); i++) {
		snprintf(lib, sizeof(lib), "%s/%s/%s", o->container_path, o->lib, preload_libs[i]);
		fprintf(f, ", ");
		tool_json_string(f, lib);
	}
	fprintf(f, "]}\n        ]");
}

static void print_spec(FILE *f, const struct cdi_opts *o)
{
	char host[PATH_MAX], cont[PATH_MAX + 64];
	int first = 1;
	fprintf(f, "{\n  \"cdiVersion\": ");
	tool_json_string(f, o->cdi_version);
	fprintf(f, ",\n  \"kind\": \"" CDI_KIND "\",\n  \"devices\": [\n    {\n      \"name\": \""
		CDI_DEVICE "\",\n      \"containerEdits\": {\n");
	print_env(f, o);
	fprintf(f, "        \"mounts\": [");
	mount_entry(f, o->prefix, o->container_path, 0, &first);
	for (int i = 0; i < o->nprobe; i++) {
		probe_paths(o, i, host, cont, sizeof(host));
		if (host[0])
			mount_entry(f, host, cont, 0, &first);
	}
	if (o->trace)
		mount_entry(f, o->trace, "/run/cubpf/trace", 1, &first);
	fprintf(f, "\n        ]");
	if (!o->env_mode)
		print_hooks(f, o);
	fprintf(f, "\n      }\n    }\n  ]\n}\n");
}

/* PREFIX: the folder above this binary's bin/ (PREFIX/bin/cubpf; build/bin/cubpf in the tree). */
static int own_prefix(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	for (int i = 0; i < 2; i++) {
		char *slash = strrchr(exe, '/');
		if (!slash)
			return -1;
		*slash = '\0';
	}
	if (!exe[0] || strlen(exe) >= len)
		return -1;
	snprintf(out, len, "%s", exe);
	return 0;
}

/* An absolute, existing path for the host side of a mount. */
static int host_path(const char *what, const char *in, char *out)
{
	if (!realpath(in, out)) {
		fprintf(stderr, "cubpf cdi: %s '%s': %s\n", what, in, strerror(errno));
		return -1;
	}
	return 0;
}

static int parse_cdi_opts(int argc, char **argv, struct cdi_opts *o, char (*paths)[PATH_MAX],
			  char *trace)
{
	enum { OPT_PREFIX = 256, OPT_CPATH, OPT_ENV, OPT_PROBE, OPT_TRACE, OPT_LOG, OPT_VERSION };
	static const struct option longopts[] = {
		{"prefix", required_argument, 0, OPT_PREFIX},
		{"container-path", required_argument, 0, OPT_CPATH},
		{"env", no_argument, 0, OPT_ENV},          {"probe", required_argument, 0, OPT_PROBE},
		{"trace", required_argument, 0, OPT_TRACE}, {"log", required_argument, 0, OPT_LOG},
		{"cdi-version", required_argument, 0, OPT_VERSION},
		{"help", no_argument, 0, 'h'},             {0, 0, 0, 0},
	};
	const char *prefix = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_PREFIX: prefix = optarg; break;
		case OPT_CPATH: o->container_path = optarg; break;
		case OPT_ENV: o->env_mode = 1; break;
		case OPT_LOG: o->log = optarg; break;
		case OPT_VERSION: o->cdi_version = optarg; break;
		case OPT_TRACE:
			if (host_path("--trace", optarg, trace))
				return -1;
			o->trace = trace;
			break;
		case OPT_PROBE:
			if (o->nprobe == MAX_PROBES) {
				fprintf(stderr, "cubpf cdi: at most %d probes\n", MAX_PROBES);
				return -1;
			}
			if (strchr(optarg, '/') || strstr(optarg, ".bpf.o")) {
				if (host_path("--probe", optarg, paths[o->nprobe]))
					return -1;
				o->probe[o->nprobe] = paths[o->nprobe];
				o->nprobe++;
			} else {
				o->probe[o->nprobe++] = optarg;
			}
			break;
		case 'h': cdi_usage(stdout); return 1;
		default: cdi_usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cubpf cdi: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (prefix ? host_path("--prefix", prefix, o->prefix) : own_prefix(o->prefix, sizeof(o->prefix))) {
		if (!prefix)
			fprintf(stderr, "cubpf cdi: cannot tell where cubpf is installed (--prefix)\n");
		return -1;
	}
	if (o->container_path[0] != '/' || strpbrk(o->container_path, " :\t\n")) {
		fprintf(stderr, "cubpf cdi: --container-path '%s': an absolute path without spaces "
				"or colons (it is written into ld.so.preload)\n", o->container_path);
		return -1;
	}
	char lib[PATH_MAX + 32];
	o->lib = "lib";
	o->probes = "probes";
	snprintf(lib, sizeof(lib), "%s/lib/cubpf/libcuda.so.1", o->prefix);
	if (access(lib, R_OK) == 0) {
		o->lib = "lib/cubpf";
		o->probes = "lib/cubpf/probes";
	}
	snprintf(lib, sizeof(lib), "%s/%s/libcuda.so.1", o->prefix, o->lib);
	if (access(lib, R_OK) != 0) {
		fprintf(stderr, "cubpf cdi: %s: no cubpf libcuda.so.1 there (a prefix of `make dist` "
				"or `make install`: --prefix)\n", lib);
		return -1;
	}
	for (int i = 0; i < o->nprobe; i++) {
		snprintf(lib, sizeof(lib), "%s/%s/%s.bpf.o", o->prefix, o->probes, o->probe[i]);
		if (!strchr(o->probe[i], '/') && access(lib, R_OK) != 0) {
			fprintf(stderr, "cubpf cdi: --probe %s: no %s (a bundled tool's name, or a "
					"probe object's path)\n", o->probe[i], lib);
			return -1;
		}
	}
	return 0;
}

int cmd_cdi(int argc, char **argv)
{
	static char paths[MAX_PROBES][PATH_MAX];
	static char trace[PATH_MAX];
	struct cdi_opts o = {.container_path = "/opt/cubpf", .cdi_version = CDI_VERSION};
	int rc = parse_cdi_opts(argc, argv, &o, paths, trace);
	if (rc)
		return rc > 0 ? 0 : 2;
	print_spec(stdout, &o);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- the hook -------------------------------------------------------------------------------- */
/* Just enough JSON to read two strings: the state's "bundle" and config.json's root.path. */
static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* A string at p (after its opening quote is p[0]); its end, or NULL.  out may be NULL. */
static const char *json_string(const char *p, char *out, size_t len)
{
	size_t n = 0;
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		char c = *p;
		if (c == '\\') {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *e = *++p ? strchr(from, *p) : NULL;
			if (*p == 'u') {
				unsigned v;
				for (int i = 1; i <= 4; i++) /* all four digits: p + 4 stays in the text */
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				if (sscanf(p + 1, "%4x", &v) != 1 || v == 0 || v > 0x7f)
					return NULL; /* paths we need are ASCII */
				c = (char)v;
				p += 4;
			} else if (!e) {
				return NULL;
			} else {
				c = to[e - from];
			}
		}
		if (out && n + 1 < len)
			out[n++] = c;
		else if (out)
			return NULL;
	}
	if (out)
		out[n] = '\0';
	return *p == '"' ? p + 1 : NULL;
}

static const char *json_skip(const char *p, int depth)
{
	p = ws(p);
	if (depth > 64)
		return NULL;
	if (*p == '"')
		return json_string(p, NULL, 0);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				if (!(p = json_string(ws(p), NULL, 0)) || *(p = ws(p)) != ':')
					return NULL;
				p++;
			}
			if (!(p = json_skip(p, depth + 1)))
				return NULL;
			p = ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	const char *s = p;
	while (*p && !strchr(",}] \t\r\n", *p))
		p++;
	return p > s ? p : NULL;
}

/* The value of member `key` of the object at p, or NULL. */
static const char *json_member(const char *p, const char *key)
{
	char name[256];
	p = ws(p);
	if (*p++ != '{')
		return NULL;
	for (p = ws(p); *p == '"'; p = ws(p + 1)) {
		if (!(p = json_string(p, name, sizeof(name))) || *(p = ws(p)) != ':')
			return NULL;
		p = ws(p + 1);
		if (!strcmp(name, key))
			return p;
		if (!(p = json_skip(p, 0)) || *(p = ws(p)) != ',')
			return NULL;
	}
	return NULL;
}

static char *read_all(FILE *f)
{
	size_t n = 0, cap = 1 << 16;
	char *buf = malloc(cap + 1);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n < cap)
			break;
		char *b = cap < (64u << 20) ? realloc(buf, 2 * cap + 1) : NULL;
		if (!b) {
			free(buf);
			return NULL;
		}
		buf = b;
		cap *= 2;
	}
	if (buf)
		buf[n] = '\0';
	return buf;
}

/* The container's root folder: config.json's root.path, relative to the bundle. */
static int container_root(char *root, size_t len)
{
	char bundle[PATH_MAX], rel[PATH_MAX], cfg[PATH_MAX + 16];
	char *state = read_all(stdin), *config = NULL;
	const char *v = state ? json_member(state, "bundle") : NULL;
	int rc = -1;
	if (!v || !json_string(v, bundle, sizeof(bundle))) {
		fprintf(stderr, "cubpf cdi-hook: no \"bundle\" in the container state on stdin\n");
		goto out;
	}
	snprintf(cfg, sizeof(cfg), "%s/config.json", bundle);
	FILE *f = fopen(cfg, "r");
	config = f ? read_all(f) : NULL;
	if (f)
		fclose(f);
	v = config ? json_member(config, "root") : NULL;
	v = v ? json_member(v, "path") : NULL;
	if (!v || !json_string(v, rel, sizeof(rel))) {
		fprintf(stderr, "cubpf cdi-hook: %s: no root.path\n", cfg);
		goto out;
	}
	if ((size_t)snprintf(root, len, "%s%s%s", rel[0] == '/' ? "" : bundle,
			     rel[0] == '/' ? "" : "/", rel) < len)
		rc = 0;
out:
	free(state);
	free(config);
	return rc;
}

/* Adds the lines not there yet to ROOT/etc/ld.so.preload, through no symbolic link. */
static int add_preload_lines(const char *root, char **lines, int n)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), efd = -1, fd = -1, rc = -1;
	if (rfd < 0 || (mkdirat(rfd, "etc", 0755) != 0 && errno != EEXIST) ||
	    (efd = openat(rfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (fd = openat(efd, "ld.so.preload", O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
			 0644)) < 0) {
		fprintf(stderr, "cubpf cdi-hook: %s/etc/ld.so.preload: %s\n", root, strerror(errno));
		goto out;
	}
	FILE *f = fdopen(fd, "r+");
	if (!f)
		goto out;
	fd = -1;
	char *old = read_all(f);
	fseek(f, 0, SEEK_END);
	int last_nl = !old || !old[0] || old[strlen(old) - 1] == '\n';
	rc = old ? 0 : -1; /* unread, the lines there cannot be compared: nothing written */
	for (int i = 0; i < n && old; i++) {
		size_t l = strlen(lines[i]);
		int have = 0;
		for (const char *p = old; (p = strstr(p, lines[i])); p += l)
			have |= (p == old || strchr(" \t\n:", p[-1])) && strchr(" \t\n:", p[l]);
		if (!have) {
			fprintf(f, "%s%s\n", last_nl ? "" : "\n", lines[i]);
			last_nl = 1;
		}
	}
	free(old);
	if (fclose(f) != 0 || rc) {
		fprintf(stderr, "cubpf cdi-hook: cannot write %s/etc/ld.so.preload\n", root);
		rc = -1;
	}
out:
	if (fd >= 0)
		close(fd);
	if (efd >= 0)
		close(efd);
	if (rfd >= 0)
		close(rfd);
	return rc;
}

int cmd_cdi_hook(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[1], "--preload")) {
		fprintf(stderr, "usage: cubpf cdi-hook --preload LIB... < STATE\n\n"
				"The OCI createContainer hook of `cubpf cdi`'s spec: adds each LIB (a path\n"
				"in the container) as a line of the container's /etc/ld.so.preload.  The\n"
				"runtime passes the container's state (JSON) on stdin.\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	for (int i = 2; i < argc; i++)
		if (argv[i][0] != '/' || strpbrk(argv[i], " :\t\n")) {
			fprintf(stderr, "cubpf cdi-hook: '%s': not an absolute path without spaces\n",
				argv[i]);
			return 2;
		}
	char root[PATH_MAX];
	if (container_root(root, sizeof(root)) != 0)
		return 1;
	return add_preload_lines(root, argv + 2, argc - 2) ? 1 : 0;
}
