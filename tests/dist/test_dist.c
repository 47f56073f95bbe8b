/* tests/dist: cubpf as it ships (issue 19).
 *   - `make dist`'s tarball: its layout, nothing in it naming the build folder, and unpacked to
 *     a new prefix: the CPU shim tests (build/tests/test_shim with CUBPF_SHIM) pass against the
 *     shim there and its cubpf runs a tool; its probe headers are the ABI itself and
 *     cubpf_helpers.h, and a probe compiles against them alone;
 *   - ci/dist/Dockerfile replayed without a container engine (tests/dist/replay-dockerfile.sh);
 *   - preload mode over the fake driver: LD_PRELOAD by hand and `cubpf run --preload`, also when
 *     the program sets its own LD_LIBRARY_PATH; another interposer of the driver (soname
 *     libcuda.so.1, tests/shim/interposer.c) preloaded before cubpf (both see every call) and
 *     after it (the program works, cubpf sees every call, the other one none: README);
 *   - `cubpf cdi`: the spec's structure (parsed with python3 where there is one), and the hook
 *     on a bundle made here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/shell.h"

#ifndef DIST_TEST_BUILD
#define DIST_TEST_BUILD "build"
#endif
#ifndef DIST_TEST_SRC
#define DIST_TEST_SRC "."
#endif
#ifndef DIST_TEST_TARBALL
#define DIST_TEST_TARBALL "build/dist/cubpf-0.1.0-x86_64.tar.gz"
#endif

#define B DIST_TEST_BUILD
#define FAKE B "/tests/libcuda-fake.so"
#define APP B "/tests/tools_fake_app"
#define SHIM B "/lib/libcuda.so.1"
#define OTHER B "/tests/interposer/libcuda.so.1"

static char tmp[] = "/tmp/cubpf-test-dist-XXXXXX";


static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(tmp))
		return -1;
	/* a folder with another libcuda.so.1 (the fake driver), as an image's LD_LIBRARY_PATH has */
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/other && ln -s %s %s/other/libcuda.so.1", tmp,
		 FAKE, tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- the tarball ------------------------------------------------------------------------------ */
static void test_tarball_layout(void **state)
{
	(void)state;
	assert_int_equal(sh("tar -tzvf %s", DIST_TEST_TARBALL), 0);
	static const char *const entries[] = {
		" opt/cubpf/bin/cubpf\n", " opt/cubpf/bin/cubpf-bpf-plugin\n",
		" opt/cubpf/lib/libcuda.so.1\n", " opt/cubpf/lib/libcuda.so -> libcuda.so.1\n",
		" opt/cubpf/lib/libnvrtc.so.13\n", " opt/cubpf/lib/libnvJitLink.so.13\n",
		" opt/cubpf/lib/libcubpf-exit.so\n", " opt/cubpf/probes/kcount.bpf.o\n",
		" opt/cubpf/include/cubpf/cubpf_helpers.h\n",
		" opt/cubpf/include/cubpf/cubpf_abi.h\n", " opt/cubpf/README\n",
		" opt/cubpf/Dockerfile\n"};
	for (size_t i = 0; i < sizeof(entries) / sizeof(*entries); i++)
		has(entries[i]);
	lacks(" /"); /* every path relative: applied at / as an image layer */
	lacks(" 1000/");
	/* nothing in it names this machine's folders */
	assert_int_equal(sh("mkdir %s/scan && tar -xzf %s -C %s/scan && grep -rl '%s' %s/scan; "
			    "test $? = 1", tmp, DIST_TEST_TARBALL, tmp, DIST_TEST_SRC, tmp), 0);
	/* the shim exports only driver names and needs only glibc (checked again by test_shim) */
	assert_int_equal(sh("readelf -d %s/scan/opt/cubpf/lib/libcuda.so.1 | grep NEEDED", tmp), 0);
	lacks("libz");
	lacks("libsqlite");
}

/* Unpacked to a new prefix: the CPU shim tests against the shim there, and its cubpf. */
static void test_unpacked_prefix(void **state)
{
	(void)state;
	assert_int_equal(sh("mkdir -p %s/prefix && tar -xzf %s --strip-components=2 -C %s/prefix",
			    tmp, DIST_TEST_TARBALL, tmp), 0);
	assert_int_equal(sh("CUBPF_SHIM=%s/prefix/lib/libcuda.so.1 CUBPF_BUILD=%s %s/tests/test_shim",
			    tmp, B, B), 0);
	has("[  PASSED  ]");
	lacks("[  FAILED  ]");
	assert_int_equal(sh("%s/prefix/bin/cubpf run -t kcount --real-libcuda %s -- %s", tmp, FAKE,
			    APP), 0);
	has("tools_k                                          3          480");
	/* cubpf cdi from there names that prefix */
	assert_int_equal(sh("%s/prefix/bin/cubpf cdi", tmp), 0);
	char host[512];
	snprintf(host, sizeof(host), "\"hostPath\": \"%s/prefix\"", tmp);
	has(host);
}

/* The probe headers as they ship: the whole ABI under its own name (not the source tree's
 * forwarder to vm/include), and a probe compiled against include/cubpf alone. */
static void test_installed_probe_headers(void **state)
{
	(void)state;
	const char *clang = getenv("CLANG");
	if (!clang || !*clang)
		fail_msg("CLANG is not set (tests/run-tests.sh sets it): cannot compile a probe");
	assert_int_equal(sh("mkdir -p %s/hdr && tar -xzf %s --strip-components=2 -C %s/hdr", tmp,
			    DIST_TEST_TARBALL, tmp), 0);
	assert_int_equal(sh("cmp %s/hdr/include/cubpf/cubpf_abi.h %s/vm/include/cubpf_abi.h && "
			    "cmp %s/hdr/include/cubpf/cubpf_helpers.h %s/tools/include/cubpf_helpers.h",
			    tmp, DIST_TEST_SRC, tmp, DIST_TEST_SRC), 0);
	assert_int_equal(sh("ls %s/hdr/include/cubpf", tmp), 0);
	has("cubpf_abi.h\ncubpf_helpers.h\n");
	assert_int_equal(sh("cd %s && %s -O2 -g -target bpf -I %s/hdr/include/cubpf "
			    "-I/usr/include/$(uname -m)-linux-gnu -c tools/examples/hello.bpf.c "
			    "-o %s/hdr/hello.bpf.o && %s/hdr/bin/cubpf verify %s/hdr/hello.bpf.o",
			    DIST_TEST_SRC, clang, tmp, tmp, tmp, tmp), 0);
}

static void test_replay_dockerfile(void **state)
{
	(void)state;
	int rc = sh("%s/tests/dist/replay-dockerfile.sh %s/ci/dist/Dockerfile %s %s %s", DIST_TEST_SRC,
		    DIST_TEST_SRC, DIST_TEST_TARBALL, FAKE, APP);
	if (rc != 0)
		fail_msg("replay failed (%d):\n%s", rc, out);
	has("replay: ok: ADD");
	has("replay: ok: RUN: echo /opt/cubpf/lib/libcuda.so.1 >> /etc/ld.so.preload");
	has("replay: ok: cubpf run --preload -t kcount");
	has("the program's LD_LIBRARY_PATH naming another libcuda.so.1");
	has("replay: all steps passed");
	print_message("%s", out);
}

/* ---- preload mode ----------------------------------------------------------------------------- */
#define SUMMARY "cubpf: summary: 1 module loads (0 failed, 0 unloaded), 3 launches"
#define KCOUNT "tools_k                                          3          480"

/* By hand, no CUBPF variable but the log: the shim finds the driver by its search (here the
 * program's LD_LIBRARY_PATH, which also names cubpf's own folder: skipped). */
static void test_ld_preload_by_hand(void **state)
{
	(void)state;
	assert_int_equal(sh("LD_PRELOAD=%s LD_LIBRARY_PATH=%s/other CUBPF_LOG=info %s", SHIM, tmp,
			    APP), 0);
	has(SUMMARY);
	has("fake_app: done");
	assert_int_equal(sh("LD_PRELOAD=%s LD_LIBRARY_PATH=%s/lib:%s/other CUBPF_LOG=debug %s", SHIM,
			    B, tmp, APP), 0);
	has(SUMMARY);
	has("is this shim, skipped");
}

static void test_run_preload(void **state)
{
	(void)state;
	/* LD_LIBRARY_PATH left as it is, the shim after the user's preloads */
	assert_int_equal(sh("LD_LIBRARY_PATH=/x LD_PRELOAD=/u.so %s/bin/cubpf run --preload -- sh -c "
			    "'echo LLP=$LD_LIBRARY_PATH.; echo LDP=$LD_PRELOAD.'", B), 0);
	has("LLP=/x.");
	has("/u.so:" B "/lib/libcuda.so.1:" B "/lib/libcubpf-exit.so.");
	assert_int_equal(sh("%s/bin/cubpf run --preload --disable -- sh -c 'echo LDP=$LD_PRELOAD.'",
			    B), 0);
	has("LDP=" B "/lib/libcuda.so.1.");
	/* the program's own LD_LIBRARY_PATH names another libcuda.so.1: cubpf's is the one */
	assert_int_equal(sh("%s/bin/cubpf run --preload -t kcount --real-libcuda %s -- env "
			    "LD_LIBRARY_PATH=%s/other %s", B, FAKE, tmp, APP), 0);
	has(KCOUNT);
	/* the same without --preload: the program's LD_LIBRARY_PATH wins, cubpf sees nothing */
	assert_int_equal(sh("%s/bin/cubpf run -t kcount --real-libcuda %s -- env "
			    "LD_LIBRARY_PATH=%s/other %s", B, FAKE, tmp, APP), 0);
	has("no report: the program made no CUDA driver call through cubpf");
	assert_int_equal(sh("%s/bin/cubpf run --help", B), 0);
	has("--preload");
}

/* Another interposer preloaded before cubpf: the program's dlopen("libcuda.so.1") gets it (the
 * first object of that soname), its calls reach cubpf through RTLD_NEXT, cubpf the driver. */
static void test_interposer_before_cubpf(void **state)
{
	(void)state;
	assert_int_equal(sh("LD_PRELOAD=%s %s/bin/cubpf run --preload -t kcount --real-libcuda %s -- "
			    "%s", OTHER, B, FAKE, APP), 0);
	has("interposer: 5 calls, 3 launches");
	has(KCOUNT);
	assert_int_equal(sh("LD_PRELOAD=%s:%s CUBPF_LOG=info CUBPF_REAL_LIBCUDA=%s %s", OTHER, SHIM,
			    FAKE, APP), 0);
	has("interposer: 5 calls, 3 launches");
	has(SUMMARY);
}

/* After cubpf: the program works and cubpf sees every call, but the other interposer sees none:
 * cubpf comes first for the soname and calls the real driver itself (loaded privately,
 * RTLD_LOCAL), never the next definition.  README, "In containers": put other interposers
 * first. */
static void test_interposer_after_cubpf(void **state)
{
	(void)state;
	assert_int_equal(sh("LD_PRELOAD=%s:%s CUBPF_LOG=info CUBPF_REAL_LIBCUDA=%s %s", SHIM, OTHER,
			    FAKE, APP), 0);
	has("fake_app: done");
	has(SUMMARY);
	has("interposer: 0 calls, 0 launches");
}

/* ---- cubpf cdi -------------------------------------------------------------------------------- */
static int have_python(void)
{
	return system("python3 -c 'import json' >/dev/null 2>&1") == 0;
}

/* The spec of `cubpf cdi ARGS` checked by python3 statements (s: the spec, e: its device's
 * containerEdits); without python3, by the substrings given. */
static void check_spec(const char *args, const char *py, const char *const *subs)
{
	char spec[512];
	snprintf(spec, sizeof(spec), "%s/spec.json", tmp);
	assert_int_equal(sh("%s/bin/cubpf cdi %s > %s", B, args, spec), 0);
	if (have_python()) {
		int rc = sh("python3 -c 'import json,sys\ns=json.load(open(sys.argv[1]))\n"
			    "assert set(s) == {\"cdiVersion\",\"kind\",\"devices\"}, s\n"
			    "assert s[\"kind\"] == \"cubpf.dev/layer\"\n"
			    "assert [d[\"name\"] for d in s[\"devices\"]] == [\"cubpf\"]\n"
			    "e=s[\"devices\"][0][\"containerEdits\"]\n"
			    "assert set(e) <= {\"env\",\"mounts\",\"hooks\"}, e\n"
			    "m=e[\"mounts\"][0]\n"
			    "assert m[\"hostPath\"] == \"%s\" and m[\"options\"] == "
			    "[\"ro\",\"nosuid\",\"nodev\",\"bind\"], m\n"
			    "%s\nprint(\"spec ok\")' %s", B, py, spec);
		if (rc != 0)
			fail_msg("cubpf cdi %s:\n%s", args, out);
		has("spec ok");
		return;
	}
	assert_int_equal(sh("cat %s", spec), 0);
	for (size_t i = 0; subs[i]; i++)
		has(subs[i]);
}

static void test_cdi_spec(void **state)
{
	(void)state;
	static const char *const hook[] = {"\"cdiVersion\": \"1.1.0\"", "\"hookName\": \"createContainer\"",
					   "\"containerPath\": \"/opt/cubpf\"", NULL};
	check_spec("", "assert s[\"cdiVersion\"] == \"1.1.0\"\n"
		   "assert m[\"containerPath\"] == \"/opt/cubpf\" and len(e[\"mounts\"]) == 1\n"
		   "assert \"env\" not in e\n"
		   "h=e[\"hooks\"]\n"
		   "assert len(h) == 1 and h[0][\"hookName\"] == \"createContainer\"\n"
		   "assert h[0][\"path\"] == \"" B "/bin/cubpf\"\n"
		   "assert h[0][\"args\"] == [\"cubpf\",\"cdi-hook\",\"--preload\"] + "
		   "[\"/opt/cubpf/lib/\" + l for l in (\"libnvrtc.so.13\",\"libnvJitLink.so.13\","
		   "\"libcuda.so.1\",\"libcubpf-exit.so\")], h", hook);
	static const char *const env[] = {"\"LD_PRELOAD=/c/lib/libnvrtc.so.13:", "\"CUBPF_LOG=info\"",
					  "\"CUBPF_TRACE=/run/cubpf/trace/\"", NULL};
	char args[1024];
	snprintf(args, sizeof(args), "--env --container-path /c --cdi-version 0.6.0 --probe kcount "
		 "--probe %s/probes/memtrace.bpf.o --trace %s --log info", B, tmp);
	char py[4096];
	snprintf(py, sizeof(py),
		 "assert s[\"cdiVersion\"] == \"0.6.0\"\n"
		 "assert \"hooks\" not in e\n"
		 "assert e[\"env\"] == [\"LD_PRELOAD=/c/lib/libnvrtc.so.13:/c/lib/libnvJitLink.so.13:"
		 "/c/lib/libcuda.so.1:/c/lib/libcubpf-exit.so\", \"CUBPF_PROGRAMS=/c/probes/kcount.bpf.o:"
		 "/run/cubpf/probes/1-memtrace.bpf.o\", \"CUBPF_TRACE=/run/cubpf/trace/\", "
		 "\"CUBPF_LOG=info\"], e\n"
		 "assert e[\"mounts\"][1:] == [{\"hostPath\": \"%s/probes/memtrace.bpf.o\", "
		 "\"containerPath\": \"/run/cubpf/probes/1-memtrace.bpf.o\", \"options\": "
		 "[\"ro\",\"nosuid\",\"nodev\",\"bind\"]}, {\"hostPath\": \"%s\", "
		 "\"containerPath\": \"/run/cubpf/trace\", \"options\": "
		 "[\"rw\",\"nosuid\",\"nodev\",\"bind\"]}], e", B, tmp);
	check_spec(args, py, env);
	/* errors */
	assert_int_equal(sh("%s/bin/cubpf cdi --container-path rel", B), 2);
	has("an absolute path");
	assert_int_equal(sh("%s/bin/cubpf cdi --prefix /", B), 2);
	has("no cubpf libcuda.so.1 there");
	assert_int_equal(sh("%s/bin/cubpf cdi --probe nosuchtool", B), 2);
	has("--probe nosuchtool");
	assert_int_equal(sh("%s/bin/cubpf cdi --help", B), 0);
	has("usage: cubpf cdi");
}

/* The hook on a bundle: root.path relative to it; lines added once, the image's kept; a
 * symbolic link in the image refused (never followed onto the host). */
static void test_cdi_hook(void **state)
{
	(void)state;
	const char *state_json = "{\"ociVersion\":\"1.0.2\",\"id\":\"c\",\"status\":\"creating\","
				 "\"pid\":1,\"bundle\":\"%s/bundle\",\"annotations\":{\"a\":\"b\"}}";
	char st[1024];
	snprintf(st, sizeof(st), state_json, tmp);
	assert_int_equal(sh("mkdir -p %s/bundle/rootfs/etc && printf '%%s' '{\"ociVersion\":\"1.0.2\","
			    "\"annotations\":{\"root\":\"x\"},\"root\":{\"readonly\":true,"
			    "\"path\":\"rootfs\"}}' > %s/bundle/config.json && printf /img.so "
			    "> %s/bundle/rootfs/etc/ld.so.preload", tmp, tmp, tmp), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(sh("echo '%s' | %s/bin/cubpf cdi-hook --preload /opt/cubpf/lib/libcuda.so.1 "
				    "/opt/cubpf/lib/libcubpf-exit.so", st, B), 0);
	assert_int_equal(sh("cat %s/bundle/rootfs/etc/ld.so.preload", tmp), 0);
	assert_string_equal(out, "/img.so\n/opt/cubpf/lib/libcuda.so.1\n/opt/cubpf/lib/libcubpf-exit.so\n");
	/* no etc/ at all: made */
	assert_int_equal(sh("rm -rf %s/bundle/rootfs/etc && echo '%s' | %s/bin/cubpf cdi-hook "
			    "--preload /opt/cubpf/lib/libcuda.so.1 && cat %s/bundle/rootfs/etc/ld.so.preload",
			    tmp, st, B, tmp), 0);
	assert_string_equal(out, "/opt/cubpf/lib/libcuda.so.1\n");
	/* the image's ld.so.preload, or its etc/, a symbolic link: refused, nothing written */
	assert_int_equal(sh("rm %s/bundle/rootfs/etc/ld.so.preload && ln -s %s/victim "
			    "%s/bundle/rootfs/etc/ld.so.preload && echo '%s' | %s/bin/cubpf cdi-hook "
			    "--preload /opt/cubpf/lib/libcuda.so.1", tmp, tmp, tmp, st, B), 1);
	char victim[512];
	snprintf(victim, sizeof(victim), "%s/victim", tmp);
	assert_int_equal(access(victim, F_OK), -1);
	assert_int_equal(sh("rm -rf %s/bundle/rootfs/etc && mkdir %s/victimdir && ln -s %s/victimdir "
			    "%s/bundle/rootfs/etc && echo '%s' | %s/bin/cubpf cdi-hook --preload "
			    "/opt/cubpf/lib/libcuda.so.1; ls %s/victimdir | wc -l", tmp, tmp, tmp, tmp, st,
			    B, tmp), 0);
	has("Not a directory");
	has("\n0\n");
	/* no state, a path with a space */
	assert_int_equal(sh("echo '{}' | %s/bin/cubpf cdi-hook --preload /opt/x.so", B), 1);
	has("no \"bundle\"");
	assert_int_equal(sh("%s/bin/cubpf cdi-hook --preload '/opt/a b.so' < /dev/null", B), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tarball_layout),
		cmocka_unit_test(test_unpacked_prefix),
		cmocka_unit_test(test_installed_probe_headers),
		cmocka_unit_test(test_replay_dockerfile),
		cmocka_unit_test(test_ld_preload_by_hand),
		cmocka_unit_test(test_run_preload),
		cmocka_unit_test(test_interposer_before_cubpf),
		cmocka_unit_test(test_interposer_after_cubpf),
		cmocka_unit_test(test_cdi_spec),
		cmocka_unit_test(test_cdi_hook),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
