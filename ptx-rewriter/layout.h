/* ptx-rewriter/layout.h: device memory shared by the PTX code generator and the shim.
 *
 * The ring-buffer protocol, the enable words and the layouts of GPU maps: the contract between
 * the code the generator emits (ptx-rewriter/maps.c, inject.c) and the host side that allocates,
 * fills and drains that memory (shim/live/).  Not probe ABI: probe programs never see these
 * layouts (they call helpers); the probe ABI is vm/include/cubpf_abi.h, included here for the
 * map types and limits.  Plain macros and structs over <linux/types.h>, so that test and
 * benchmark programs compile it alone.  A layout changed here changes generated code and the
 * shim together.
 */
#ifndef CUBPF_PTX_LAYOUT_H
#define CUBPF_PTX_LAYOUT_H

#include <linux/types.h>

#include "vm/include/cubpf_abi.h"

/* ---- GPU ring buffers: memory layout shared by the device code and the shim's drain ---------
 * A ring buffer map used by GPU programs has two parts:
 *  - the ring, in pinned host memory mapped into the device (the drain thread reads it without
 *    any copy): a header, the consumers' tails, the host's copy of the drop counts, then `lanes`
 *    byte rings of `lane_bytes` each (a multiple of 128, not necessarily a power of two);
 *  - the producers' bookkeeping, in device memory (cubpf_rb_state, then three arrays of one u64
 *    per lane: heads, tails, drops), so that neither a reservation nor a drop crosses PCIe:
 *    heads are reserved with an L2 compare-and-swap, `tails` is the host's copy of the ring's
 *    tails (the host copies them in with the copy engine after it frees space) and drops are
 *    counted with L2 adds (the host copies them out).  Measured on an H100 (b_rbmicro.sh): a
 *    warp's 1.5 KB batch costs the SMs ~34 ns of PCIe time when 32768 warps write at once,
 *    a read of pinned memory 6.4 ns and a system-scope add 10 ns, against 0.3 ns in the L2: when
 *    most batches are dropped, PCIe round trips for drops would cost more than the records.
 *    The module's __cubpf_map_<i> holds the address of this part; its header holds the device
 *    addresses of the arrays and of the ring's data.
 * Lanes are per warp slot: a warp writes to lane (%smid * warps + %warpid) % lanes, `warps` being
 * the most warps an SM holds (max threads per SM / 32).  A slot holds one warp at a time, so
 * lanes are practically uncontended (a CAS still guards the head: %warpid may change under
 * preemption).  Positions are byte counts since the start, never wrapped; the offset in the lane
 * is position % lane_bytes.
 *
 * A batch holds the records of the warp's lanes that call one bpf_ringbuf_output together
 * (activemask), k of them, each of `len` payload bytes (words = (len + 7) / 8), stored
 * field-major so that each warp-wide store writes k consecutive 8-byte words:
 *   +0  u32 k, u32 len            (k = 0: padding up to the end of the lane, skip it)
 *   +8  u64 commit = CUBPF_RB_TAG(position of the batch), written last
 *   +16 word i of the record of rank r at +16 + (i * k + r) * 8
 * CUBPF_RB_BATCH_BYTES(k, len) bytes in all (16-aligned); a batch never wraps around the lane's
 * end: one that would is preceded by a padding batch (k = 0) filling the lane to its end.
 *
 * Producer (device; never waits), by the lowest calling lane of the warp (the leader):
 *   1. loop: h = heads[lane]; pad = lane_bytes - h % lane_bytes if the batch does not fit
 *      before the end, else 0; need = pad + batch; if h + need - tails[lane] > lane_bytes (the
 *      device copy of the tail, which lags the ring's), add k to drops[lane] and give up: the k
 *      records are lost, counted; if CAS(heads[lane], h, h + need) wins, the bytes [h, h + need)
 *      are the warp's;
 *   2. every caller stores its payload words; the leader stores {k, len} (and {0, 0} for the
 *      padding);
 *   3. bar.warp.sync over the callers, then the leader fences (membar.sys) and stores the
 *      commit words (the padding's, then the batch's).  bar.warp.sync orders the callers' stores
 *      before the leader's fence, and fences are cumulative.
 * Consumer (host): at tail, a commit word other than CUBPF_RB_TAG(tail) means "not yet"; with
 * the tag, the batch is complete: unpack its k records, zero its bytes (so that stale payload
 * can never pass for a later batch's commit word), then publish tail += its bytes.  Batches of
 * a lane are consumed in reservation order; records of a batch in rank order.  After freeing
 * space the host copies the ring's tails to the device's `tails` (a copy only ever raises them:
 * the device may see an older tail, never a newer one than the ring's), and from time to time
 * the device's drops to the ring's. */
#define CUBPF_RB_VERSION 3u
#define CUBPF_RB_BATCH_HDR 16u
#define CUBPF_RB_TAG(pos) ((__u64)(pos) + 1) /* never 0: zeroed memory is "not yet" */
#define CUBPF_RB_BATCH_BYTES(k, len) \
	((CUBPF_RB_BATCH_HDR + 8 * (__u64)(k) * (((__u64)(len) + 7) / 8) + 15) & ~(__u64)15)

/* The ring (pinned host memory). */
struct cubpf_rb_header {
	__u32 version;      /* CUBPF_RB_VERSION */
	__u32 lanes;        /* number of lanes */
	__u32 warps;        /* warp slots per SM (lanes = SMs x warps) */
	__u32 pad;
	__u64 lane_bytes;   /* data bytes per lane, a multiple of 128 */
	__u64 state;        /* device address of the producers' part (cubpf_rb_state) */
	__u64 reserved[4];  /* 64 bytes in all */
};

/* Byte offsets in the ring: tails (u64 per lane, written by the host), drops (u64 per lane,
 * the host's copy of the device's counts), lane data; and the ring's total size. */
#define CUBPF_RB_TAILS_OFFSET 64u
#define CUBPF_RB_DROPS_OFFSET(lanes) (64 + (((__u64)(lanes) * 8 + 63) & ~(__u64)63))
#define CUBPF_RB_DATA_OFFSET(lanes) \
	((CUBPF_RB_DROPS_OFFSET(lanes) + (__u64)(lanes) * 8 + 127) & ~(__u64)127)
#define CUBPF_RB_LANE_OFFSET(i, lanes, lane_bytes) \
	(CUBPF_RB_DATA_OFFSET(lanes) + (__u64)(i) * (lane_bytes))
#define CUBPF_RB_MAP_BYTES(lanes, lane_bytes) CUBPF_RB_LANE_OFFSET(lanes, lanes, lane_bytes)

/* The producers' part (device memory): this header, then the arrays heads, tails and drops,
 * one u64 per lane each, every array 128-aligned (CUBPF_RB_STATE_ARRAY bytes). */
struct cubpf_rb_state {
	__u32 lanes, warps;  /* as in the ring's header */
	__u64 lane_bytes;
	__u64 heads;         /* device address: bytes reserved by producers, per lane (CAS) */
	__u64 tails;         /* device address: the ring's tails as the host last copied them */
	__u64 drops;         /* device address: records dropped, per lane (device-scope adds) */
	__u64 data;          /* device address of lane 0's data in the ring */
	__u64 reserved[2];   /* 64 bytes in all */
};
#define CUBPF_RB_STATE_ARRAY(lanes) (((__u64)(lanes) * 8 + 127) & ~(__u64)127)
#define CUBPF_RB_STATE_HEADS(lanes) ((__u64)sizeof(struct cubpf_rb_state))
#define CUBPF_RB_STATE_TAILS(lanes) (CUBPF_RB_STATE_HEADS(lanes) + CUBPF_RB_STATE_ARRAY(lanes))
#define CUBPF_RB_STATE_DROPS(lanes) (CUBPF_RB_STATE_TAILS(lanes) + CUBPF_RB_STATE_ARRAY(lanes))
#define CUBPF_RB_STATE_BYTES(lanes) (CUBPF_RB_STATE_DROPS(lanes) + CUBPF_RB_STATE_ARRAY(lanes))

/* ---- enable words: switching probes on and off without reloading modules -------------------
 * An instrumented module that honours them declares
 *     .visible .const .align 8 .u64 __cubpf_enable;
 * and the host stores there the device address of CUBPF_ENABLE_WORDS u32 words (per context).
 * Word k belongs to the kernel whose ctx->kernel_id is k (word 0: device functions shared by
 * several kernels, CUBPF_KERNEL_ID_SHARED); bit p enables GPU program p (its index among the
 * programs given to the rewriter; programs from 32 on use bit 31).  The injected code reads the
 * word when the probe starts and skips the program when its bit is 0.  All bits start at 1.
 * The host changes a word with a memset on the launch's own stream, before the launch (stream
 * order: no synchronisation), for launch sampling (CUBPF_SAMPLE=N: every Nth launch of a kernel
 * runs its probes). */
#define CUBPF_ENABLE_SYMBOL "__cubpf_enable"
#define CUBPF_ENABLE_WORDS 4096u

/* ---- thread block state in shared memory: which thread of a block leaves last ------------
 * A kernel with blockretprobes keeps its block's state in 16 bytes of static shared memory of
 * its own,
 *     .shared .align 8 .b8 __cubpf_block[16];      (struct cubpf_block_shared)
 * where its module can take them: it declares no dynamic shared memory (.extern .shared) and at
 * most 32 KB of static, these 16 bytes and the deferred counters' sums (ptx-rewriter/accs.c)
 * counted (ptx-rewriter/inject.c, shared_room), and CUBPF_SHARED_SUMS is not 0
 * (ptx_inject_opts.no_shared).  A kernel that opts in to all the shared memory the device
 * allows must declare dynamic shared memory to use it, so it never gets here: the 16 bytes
 * cannot take room a launch asks for.  Nothing of the block's state is in device memory: the
 * block's begin and end touch no global memory but what the programs do (issue 32: the block
 * table's L2 round trips cost blocklat 2.6x on vec_add):
 *   begin, thread (0,0,0) only: stores begin_ns (%globaltimer) and left (the block's thread
 *     count), runs the blockprobes, then every thread of the block waits at a `bar.sync 0`
 *     (shared memory starts undefined: no thread may leave before left is set);
 *   end, the lowest lane of each group of lanes leaving together: atom.shared.add of
 *     -popc(activemask) to left; the group that brings it to zero is the block's last, and its
 *     lowest lane runs the blockretprobes (ctx->begin_ns is begin_ns).
 * A thread that ends inside a .func (exit there) is never counted: its block runs no end probe
 * (with the table below its slot would stay taken).
 * Elsewhere, the table: */
#define CUBPF_BLOCK_SHARED_SYMBOL "__cubpf_block"
struct cubpf_block_shared {
	__u64 begin_ns;     /* %globaltimer when the block began */
	__u32 left;         /* threads of the block still running */
	__u32 pad;          /* 16 bytes in all */
};
#define CUBPF_BLOCK_SHARED_BYTES 16u

/* ---- thread block table: which thread of a block leaves last (blockretprobe) --------------
 * A module with blockretprobes in a kernel that keeps no state in shared memory (above)
 * declares
 *     .visible .const .align 8 .u64 __cubpf_blocks;
 * and the host stores there the device address of one table per context (never per module:
 * PyTorch loads ~1800 modules), CUBPF_BLOCK_TABLE_BYTES, zeroed before the first launch.  No
 * shared memory: a kernel's static shared size, and so the dynamic size it may opt in to, is
 * what it was without cubpf.
 * Slots: open addressing with linear probing over CUBPF_BLOCK_SLOTS slots of
 * struct cubpf_block_slot, at most CUBPF_BLOCK_PROBES tried from the start slot.  Every block
 * that can be resident at once on the largest GPUs (148 SMs x 32 blocks = 4736) fills under
 * 15% of them.  A live block's key:
 *     key = ((rot32(%gridid) ^ linear %ctaid) << 1) | 1        (rot32: rotate by 32 bits)
 * with linear %ctaid = (ctaid.z * nctaid.y + ctaid.y) * nctaid.x + ctaid.x in 64 bits.  Keys are
 * odd: never EMPTY (0) nor TOMB (2).  %gridid numbers a context's launches (64 bits), so two
 * blocks live at once share a key only if their grids' ids differ exactly as their linear
 * block indexes do with halves swapped: for launch numbers under 2^32, a grid of more than
 * 2^32 blocks, or two grids 2^31 launches apart both still running (the top bit is dropped).
 * The start slot is the top 15 bits of key * CUBPF_BLOCK_HASH_MUL.
 *   begin, thread (0,0,0) only (the only thread that inserts: a key is never inserted twice):
 *     from the start slot, a free slot (EMPTY, or TOMB: what cubpf before 2026-11-28 freed
 *     slots with) is claimed by a CAS to the key (acquire), tried first from EMPTY with no
 *     load before it (a CAS that returns the other free value is tried again from it; each
 *     try counts as a probe); then it stores begin_ns (%globaltimer) and left (the block's
 *     thread count); when CUBPF_BLOCK_PROBES slots are tried in vain, the block is not tracked
 *     (its end runs no probe) and the u64 at CUBPF_BLOCK_UNTRACKED_OFFSET counts it.  Then
 *     every thread of the block waits at a `bar.sync 0`: no thread looks its block up before
 *     the insert;
 *   end, the lowest lane of each group of lanes leaving together: finds the key from the start
 *     slot (it is there, so the scan ends; at most CUBPF_BLOCK_PROBES slots, for an untracked
 *     block), then adds -popc(activemask) to left; the group that brings it to zero is the
 *     block's last, runs the blockretprobes (ctx->begin_ns is the slot's begin_ns), then
 *     stores EMPTY as the key (release), so the slot can serve another block.  The scan for a
 *     key never stops at a free slot, so a freed slot needs no tombstone.
 * Loads and stores of the table are at .gpu scope (relaxed; .volatile before sm_70/PTX 6.0,
 * where membar.gl stands for acquire and release). */
#define CUBPF_BLOCKS_SYMBOL "__cubpf_blocks"
#define CUBPF_BLOCK_SLOTS 32768u      /* a power of two */
#define CUBPF_BLOCK_SLOT_BITS 15u     /* log2(CUBPF_BLOCK_SLOTS) */
#define CUBPF_BLOCK_PROBES 128u
#define CUBPF_BLOCK_EMPTY 0ull
#define CUBPF_BLOCK_TOMB 2ull       /* free, as older cubpf left slots (still accepted) */
#define CUBPF_BLOCK_HASH_MUL 0x9E3779B97F4A7C15ull
struct cubpf_block_slot {
	__u64 key;          /* EMPTY, TOMB, or a live block's key */
	__u64 begin_ns;     /* %globaltimer when the block began */
	__u32 left;         /* threads of the block still running */
	__u32 pad;
	__u64 reserved;     /* 32 bytes in all */
};
#define CUBPF_BLOCK_SLOT_BYTES 32u
#define CUBPF_BLOCK_UNTRACKED_OFFSET ((__u64)CUBPF_BLOCK_SLOTS * CUBPF_BLOCK_SLOT_BYTES)
#define CUBPF_BLOCK_TABLE_BYTES (CUBPF_BLOCK_UNTRACKED_OFFSET + 128)

/* ---- GPU map layouts: device memory shared by the PTX code generator and the shim ----------
 * Every map used by GPU programs is one device allocation whose address the host stores in the
 * module's __cubpf_map_<i> (see ptx-rewriter/ptx.h); the host zeroes it before the first launch.
 * Values are at 8-aligned offsets (value strides are CUBPF_VALUE_STRIDE bytes), so programs'
 * aligned accesses to them compile to single instructions. */
#define CUBPF_VALUE_STRIDE(value_size) (((__u64)(value_size) + 7) & ~(__u64)7)

/* CUBPF_MAP_PERCPU_ARRAY on the GPU: one copy of each value per SM slot, slot = %smid %
 * CUBPF_PERCPU_SLOTS; key-major: the copy of key k for slot s is at byte
 * CUBPF_PERCPU_OFFSET(k, s, value_size).  A lookup returns the copy of the SM running the
 * thread; the reader (host) sums or merges the CUBPF_PERCPU_SLOTS copies of a key.  Threads of
 * one SM still run concurrently: programs update with atomics (__sync_fetch_and_add), which
 * never contend across SMs.  An update from a program writes only its SM's copy.
 * Key-major means the copies of neighbouring SM slots are adjacent: with values under 128
 * bytes several SMs' copies share a cache line, and the L2 serialises updates to a line
 * (~2 ns each, measured on an H100: a warp leader on every SM adding to 8-byte copies, 16 to a
 * line, slowed a memory-bound kernel 2.8x).  Values that every warp updates should be padded
 * to 128 bytes (the bundled kcount and memtrace do). */
#define CUBPF_PERCPU_SLOTS 256u
#define CUBPF_PERCPU_OFFSET(key, slot, value_size) \
	(((__u64)(key) * CUBPF_PERCPU_SLOTS + (slot)) * CUBPF_VALUE_STRIDE(value_size))
#define CUBPF_PERCPU_MAP_BYTES(max_entries, value_size) \
	CUBPF_PERCPU_OFFSET(max_entries, 0, value_size)

/* CUBPF_MAP_PERTHREAD_ARRAY (bpftime's PERGPUTD array): each GPU thread has its own copy of
 * each value.  The map starts with a 64-byte header whose first u64 is `threads`, the number of
 * thread copies the host sized it for (its choice, e.g. the largest launch it expects); values
 * follow, key-major as in bpftime: the copy of key k for thread t is at byte
 * CUBPF_PERTHREAD_OFFSET(k, t, threads, value_size), t the global linear thread id
 *   t = ((ctaid.z * nctaid.y + ctaid.y) * nctaid.x + ctaid.x) * (ntid.x * ntid.y * ntid.z)
 *       + (tid.z * ntid.y + tid.y) * ntid.x + tid.x.
 * A thread whose t >= threads has no copy: its lookups return NULL and its updates -E2BIG.
 * Only the thread itself touches its copies: no atomics needed. */
struct cubpf_perthread_header {
	__u64 threads;      /* thread copies per key (set by the host) */
	__u64 reserved[7];  /* 64 bytes in all */
};
#define CUBPF_PERTHREAD_OFFSET(key, thread, threads, value_size)                 \
	(sizeof(struct cubpf_perthread_header) +                                 \
	 ((__u64)(key) * (threads) + (thread)) * CUBPF_VALUE_STRIDE(value_size))
#define CUBPF_PERTHREAD_MAP_BYTES(max_entries, threads, value_size) \
	CUBPF_PERTHREAD_OFFSET(max_entries, 0, threads, value_size)

/* CUBPF_MAP_HASH on the GPU: lock-free open addressing with linear probing over
 * CUBPF_HASH_CAPACITY(max_entries) slots (max_entries rounded up to a power of two).  Slot i is
 * at byte i * CUBPF_HASH_SLOT_BYTES(key_size, value_size): a u32 state word, a u32 of padding,
 * the key as CUBPF_HASH_KEY_WORDS(key_size) little-endian u64 words (the last zero-padded), then
 * the value (8-aligned).  A key starts probing at cubpf_hash_key(words) & (capacity - 1).
 *   insert: CAS state EMPTY -> BUSY, write key and value, fence, state = FULL;
 *   lookup: stop at EMPTY (absent); FULL with equal key words: found; BUSY and TOMB: go on;
 *   update of a present key: the value is overwritten in place (not atomically: a concurrent
 *     reader may see a mix of old and new bytes, as with Linux's in-place array updates);
 *   delete: CAS FULL -> TOMB.  Tombstones are never reused (no resize either): a table with
 *     many deletions fills up and updates then fail with -E2BIG until the host clears it.
 * An insert that meets a BUSY slot waits for it to become FULL (a few stores of another
 * thread's insert; needs sm_70's independent thread scheduling), so that two threads inserting
 * the same key never make two entries.  Lookups never wait (a key being inserted is absent). */
#define CUBPF_HASH_EMPTY 0u
#define CUBPF_HASH_BUSY 1u
#define CUBPF_HASH_FULL 2u
#define CUBPF_HASH_TOMB 3u
#define CUBPF_HASH_KEY_WORDS(key_size) (((__u32)(key_size) + 7) / 8)
#define CUBPF_HASH_SLOT_BYTES(key_size, value_size) \
	(8 + 8 * (__u64)CUBPF_HASH_KEY_WORDS(key_size) + CUBPF_VALUE_STRIDE(value_size))

static inline __u32 cubpf_hash_capacity(__u32 max_entries)
{
	__u32 c = 1;
	while (c < max_entries && c < 0x80000000u)
		c <<= 1;
	return c;
}

/* The probe start of a key given as its words (FNV-1a-like over 64-bit words, then folded). */
static inline __u64 cubpf_hash_key(const __u64 *words, __u32 nwords)
{
	__u64 h = 0xcbf29ce484222325ull;
	for (__u32 i = 0; i < nwords; i++)
		h = (h ^ words[i]) * 0x100000001b3ull;
	return h ^ (h >> 32);
}
#define CUBPF_HASH_MAP_BYTES(max_entries, key_size, value_size) \
	((__u64)cubpf_hash_capacity(max_entries) * CUBPF_HASH_SLOT_BYTES(key_size, value_size))

/* ---- Patch functions' launch record (the Sanitizer backend, ptx-rewriter/patch.c) ------------
 * A patch function runs in a kernel that cubpf never saw as PTX (SASS only), through NVIDIA's
 * Compute Sanitizer patching API.  It cannot read the kernel's parameters nor any module
 * global of cubpf's: its one link to the host is the `userdata` pointer the host sets for each
 * launch (sanitizerSetLaunchCallbackData).  That pointer is the device address of this record,
 * written by the host before the launch (stream-ordered) and read-only while the kernel runs:
 *   kernel_id   ctx->kernel_id of the launched kernel;
 *   nparams     its parameter count (0 when unknown), params[] the first 8 bytes of each,
 *               zero-extended, 0 past nparams (ctx->params[i], as on the PTX path);
 *   progs       bit p: program p of the patch module runs in this launch (its glob selects
 *               the kernel); 0 makes every patch function return at once;
 *   maps[i]     the device address of map i's storage: what __cubpf_map_<i> holds on the PTX
 *               path (the same allocations: maps are shared by both backends). */
#define PTX_PATCH_MAX_PROGS 32
#define PTX_PATCH_MAX_MAPS 64
#define PTX_PATCH_REC_KERNEL_ID 0
#define PTX_PATCH_REC_NPARAMS 4
#define PTX_PATCH_REC_PROGS 8
#define PTX_PATCH_REC_PARAMS 16
#define PTX_PATCH_REC_MAPS (PTX_PATCH_REC_PARAMS + 8 * CUBPF_MAX_KERNEL_PARAMS)
#define PTX_PATCH_REC_SIZE (PTX_PATCH_REC_MAPS + 8 * PTX_PATCH_MAX_MAPS)
struct ptx_patch_record {
	__u32 kernel_id;
	__u32 nparams;
	__u32 progs;
	__u32 reserved;                        /* 0 */
	__u64 params[CUBPF_MAX_KERNEL_PARAMS];
	__u64 maps[PTX_PATCH_MAX_MAPS];
};

#endif /* CUBPF_PTX_LAYOUT_H */
