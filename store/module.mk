# store/: sqlite module cache, trace writer and reader.
#
# SQLite is compiled here, from the amalgamation that store/fetch-sqlite.sh makes out of Debian's
# source package sqlite3 (bookworm, 3.40.1; hash-pinned, cached outside git), because Debian's
# libsqlite3.a is not position-independent and the shim must carry its dependencies inside.  Its
# symbols are hidden (-fvisibility=hidden; SQLITE_API stays empty) so that the shim never
# exports sqlite3_*.
STORE_SRCS := $(wildcard store/*.c)
STORE_LIB  := $(BUILD)/lib/libcubpf-store.a
SQLITE_DIR := $(BUILD)/sqlite
SQLITE_OBJ := $(BUILD)/obj/sqlite/sqlite3.o

# Options SQLite's documentation recommends for an embedded, single-purpose copy
# (sqlite.org/compile.html), plus what the cache needs: threads (the shim is multithreaded),
# no extension loading, no shared cache, hidden symbols.
SQLITE_CFLAGS := -O2 -fPIC -fvisibility=hidden -DSQLITE_THREADSAFE=1 -DSQLITE_DQS=0 -DHAVE_USLEEP=1 \
  -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DEFAULT_WAL_SYNCHRONOUS=1 \
  -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_MAX_EXPR_DEPTH=0 -DSQLITE_OMIT_DECLTYPE \
  -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_PROGRESS_CALLBACK -DSQLITE_OMIT_SHARED_CACHE \
  -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_USE_ALLOCA -DSQLITE_ENABLE_API_ARMOR

# ci/deps.sh first: the fetch scripts need apt, dpkg-source and tclsh.
$(SQLITE_DIR)/sqlite3.c: store/fetch-sqlite.sh store/debian-source.sh | $(DEPS_STAMP)
	@store/fetch-sqlite.sh $(SQLITE_DIR)
	@touch $@ $(SQLITE_DIR)/sqlite3.h
$(SQLITE_DIR)/sqlite3.h: $(SQLITE_DIR)/sqlite3.c

$(SQLITE_OBJ): $(SQLITE_DIR)/sqlite3.c
	@mkdir -p $(@D)
	$(CC) $(SQLITE_CFLAGS) -c $< -o $@

# zstd, built here too: Debian's libzstd.a is not position-independent either (zstd_compress.o
# has R_X86_64_PC32 relocations), and the shim compresses traces.  The sources (lib/ of Debian's
# source package libzstd, bookworm, 1.5.4) come from store/fetch-zstd.sh, pinned by hash.  Symbols
# hidden.  It is the build's only zstd: ZSTD_DIR and ZSTD_PIC_LIB are defined in the top Makefile,
# where every object gets -I$(ZSTD_DIR)/lib and every program $(ZSTD_PIC_LIB) (in DEP_LIBS).
ZSTD_NAMES   := common/debug common/entropy_common common/error_private common/fse_decompress \
  common/pool common/threading common/xxhash common/zstd_common compress/fse_compress \
  compress/hist compress/huf_compress compress/zstd_compress compress/zstd_compress_literals \
  compress/zstd_compress_sequences compress/zstd_compress_superblock compress/zstd_double_fast \
  compress/zstd_fast compress/zstd_lazy compress/zstd_ldm compress/zstd_opt \
  compress/zstdmt_compress decompress/huf_decompress \
  decompress/zstd_ddict decompress/zstd_decompress_block decompress/zstd_decompress
ZSTD_OBJS    := $(patsubst %,$(BUILD)/obj/zstd/%.o,$(ZSTD_NAMES)) \
  $(BUILD)/obj/zstd/decompress/huf_decompress_amd64.o
ZSTD_CFLAGS  := -O3 -fPIC -fvisibility=hidden -DXXH_NAMESPACE=ZSTD_ -DZSTD_NO_TRACE \
  -DZSTDLIB_VISIBLE= -DZSTDERRORLIB_VISIBLE= -DZDICTLIB_VISIBLE= -I$(ZSTD_DIR)/lib

$(ZSTD_DIR)/lib/zstd.h: store/fetch-zstd.sh store/debian-source.sh | $(DEPS_STAMP)
	@store/fetch-zstd.sh $(ZSTD_DIR)
	@touch $@
$(ZSTD_DIR)/lib/%.c: $(ZSTD_DIR)/lib/zstd.h
	@test -f $@
$(ZSTD_DIR)/lib/%.S: $(ZSTD_DIR)/lib/zstd.h
	@test -f $@
# zstd.h is touched at each fetch; the sources keep their release dates: objects depend on it
# too, so that a build folder's objects of an earlier zstd are made again (else they were kept,
# asked for symbols the new sources lack, and the system's libzstd.a answered twice).
$(BUILD)/obj/zstd/%.o: $(ZSTD_DIR)/lib/%.c $(ZSTD_DIR)/lib/zstd.h
	@mkdir -p $(@D)
	$(CC) $(ZSTD_CFLAGS) -c $< -o $@
$(BUILD)/obj/zstd/%.o: $(ZSTD_DIR)/lib/%.S $(ZSTD_DIR)/lib/zstd.h
	@mkdir -p $(@D)
	$(CC) $(ZSTD_CFLAGS) -c $< -o $@
# The fetched sources are not intermediate files: make must not delete them.
.SECONDARY: $(patsubst %,$(ZSTD_DIR)/lib/%.c,$(ZSTD_NAMES)) \
  $(ZSTD_DIR)/lib/decompress/huf_decompress_amd64.S
$(ZSTD_PIC_LIB): $(ZSTD_OBJS)
LIBS += $(ZSTD_PIC_LIB)
# The sources that include zstd.h are made again when this zstd is new to the build folder:
# objects made before the build had one zstd (cubin/, some tests) read /usr/include/zstd.h, and a
# change of flags alone does not remake them (tests/ci checks that none is left).
ZSTD_STAMP := $(ZSTD_DIR)/lib/.users-stamp
ZSTD_USERS := $(call objs,$(shell grep -rl --include='*.c' '^\#include <zstd.h>' \
  cubin vm ptx-rewriter store shim tools tests 2>/dev/null))
$(ZSTD_USERS): $(ZSTD_STAMP)
$(ZSTD_STAMP): | $(ZSTD_DIR)/lib/zstd.h
	@touch $@

# store's own objects find sqlite3.h in the build folder, before the system's (zstd.h: the
# top Makefile).
$(call objs,$(STORE_SRCS)): CFLAGS += -I$(SQLITE_DIR)
$(call objs,$(STORE_SRCS)): | $(SQLITE_DIR)/sqlite3.h

$(STORE_LIB): $(call objs,$(STORE_SRCS)) $(SQLITE_OBJ)
LIBS += $(STORE_LIB)
