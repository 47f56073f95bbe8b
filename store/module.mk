# store/: sqlite module cache, trace writer and reader.
#
# SQLite is compiled here from its official amalgamation (fetched and hash-checked by
# store/fetch-sqlite.sh into a cache outside git) because Debian's libsqlite3.a is not
# position-independent and the shim must carry its dependencies inside.  Its symbols are hidden
# (-fvisibility=hidden; SQLITE_API stays empty) so that the shim never exports sqlite3_*.
STORE_SRCS := $(wildcard store/*.c)
STORE_LIB  := $(BUILD)/lib/libcubpf-store.a
SQLITE_DIR := $(BUILD)/sqlite
SQLITE_OBJ := $(BUILD)/obj/sqlite/sqlite3.o

# Options SQLite's documentation recommends for an embedded, single-purpose copy
# (sqlite.org/compile.html), plus what the cache needs: threads (the shim is multithreaded),
# no extension loading, no shared cache, hidden symbols.
SQLITE_CFLAGS := -O2 -fPIC -fvisibility=hidden -DSQLITE_THREADSAFE=1 -DSQLITE_DQS=0 \
  -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DEFAULT_WAL_SYNCHRONOUS=1 \
  -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_MAX_EXPR_DEPTH=0 -DSQLITE_OMIT_DECLTYPE \
  -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_PROGRESS_CALLBACK -DSQLITE_OMIT_SHARED_CACHE \
  -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_USE_ALLOCA -DSQLITE_STRICT_SUBTYPE=1 \
  -DSQLITE_ENABLE_API_ARMOR

$(SQLITE_DIR)/sqlite3.c: store/fetch-sqlite.sh
	@store/fetch-sqlite.sh $(SQLITE_DIR)
	@touch $@ $(SQLITE_DIR)/sqlite3.h
$(SQLITE_DIR)/sqlite3.h: $(SQLITE_DIR)/sqlite3.c

$(SQLITE_OBJ): $(SQLITE_DIR)/sqlite3.c
	@mkdir -p $(@D)
	$(CC) $(SQLITE_CFLAGS) -c $< -o $@

# store's own objects find sqlite3.h in the build folder, before the system's.
$(call objs,$(STORE_SRCS)): CFLAGS += -I$(SQLITE_DIR)
$(call objs,$(STORE_SRCS)): | $(SQLITE_DIR)/sqlite3.h

$(STORE_LIB): $(call objs,$(STORE_SRCS)) $(SQLITE_OBJ)
LIBS += $(STORE_LIB)
