/* tests/fuzz: the soundness fuzzer's generator (sound_gen.c) as its runner (sound.c) sees it. */
#ifndef CUBPF_TESTS_FUZZ_SOUND_H
#define CUBPF_TESTS_FUZZ_SOUND_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/vm.h"

#define SOUND_MAX_SUBS 6        /* subprograms of one program */
#define SOUND_MAX_INSNS 16384

/* The maps of every generated program, in this order (lddw's map index). */
enum { SOUND_MAP_HASH, SOUND_MAP_ARRAY, SOUND_MAP_RODATA, SOUND_MAP_RING, SOUND_MAP_BSS,
       SOUND_MAP_RO, SOUND_MAPS };

struct sound_map_info {
	const char *name;
	uint32_t type, key_size, value_size, max_entries;
};

/* .rodata holds SOUND_FMT_SLOTS printk formats of SOUND_FMT_LEN bytes: slot 0 the fixed
 * "%llx %llx %llx\n", the others drawn from the whole printk grammar (vm/printk.c) per program,
 * valid ones mostly, refused ones in risky programs. */
#define SOUND_FMT_SLOTS 8
#define SOUND_FMT_LEN 32
#define SOUND_RODATA_SIZE (SOUND_FMT_SLOTS * SOUND_FMT_LEN)

struct sound_prog {
	enum vm_prog_kind kind;
	char rodata[SOUND_RODATA_SIZE];
	uint32_t n;
	uint32_t subprogs[SOUND_MAX_SUBS + 1]; /* start of each function; [0] == 0 */
	uint32_t nsubprogs;
	struct bpf_insn insns[SOUND_MAX_INSNS];
};

/* xorshift64*: the fuzzer's only source of randomness (a seed gives the same programs). */
uint64_t sound_rand(uint64_t *state);
const struct sound_map_info *sound_map(uint32_t index);
/* The context size of a program kind (what r1 points at). */
uint32_t sound_ctx_size(enum vm_prog_kind kind);
/* On: generate only what the differential check (tests/ptx/ptxdiff.h) compares: GPU kinds,
 * every map an array (sound_map answers so), no printk, ring buffer or thread index helpers. */
void sound_set_ptx_scope(bool on);
/* The .rodata of programs saved before it held formats: slot 0 only. */
void sound_rodata_default(struct sound_prog *p);
/* Generates one program into *p; false when it came out too large (skip it). */
bool sound_generate(uint64_t *rng, struct sound_prog *p);

#endif
