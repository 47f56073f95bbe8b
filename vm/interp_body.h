/* The interpreter loop, included twice by interp.c: VM_BODY_NAME with VM_CHECKED 0 (verified
 * programs: no checks the verifier already proved) or 1 (bounds and budget checked).  Not a
 * header of its own: it expects interp.c's definitions. */

static int VM_BODY_NAME(struct vm_run *r, uint64_t *ret)
{
	static const void *const labels[OP_COUNT] = {
#define L4(n) [OP_##n##64K] = &&L_##n##64K, [OP_##n##64X] = &&L_##n##64X, \
	      [OP_##n##32K] = &&L_##n##32K, [OP_##n##32X] = &&L_##n##32X,
		VM_ALU_OPS(L4) VM_JMP_OPS(L4)
#undef L4
		[OP_NEG64] = &&L_NEG64, [OP_NEG32] = &&L_NEG32,
		[OP_LE16] = &&L_LE16, [OP_LE32] = &&L_LE32, [OP_LE64] = &&L_LE64,
		[OP_BE16] = &&L_BE16, [OP_BE32] = &&L_BE32, [OP_BE64] = &&L_BE64,
		[OP_BSWAP16] = &&L_BE16, [OP_BSWAP32] = &&L_BE32, [OP_BSWAP64] = &&L_BE64,
		[OP_JA] = &&L_JA, [OP_CALL] = &&L_CALL, [OP_CALL_LOCAL] = &&L_CALL_LOCAL,
		[OP_CALLX] = &&L_CALLX, [OP_EXIT] = &&L_EXIT, [OP_LDDW] = &&L_LDDW,
		[OP_LDXB] = &&L_LDXB, [OP_LDXH] = &&L_LDXH, [OP_LDXW] = &&L_LDXW,
		[OP_LDXDW] = &&L_LDXDW, [OP_LDXSB] = &&L_LDXSB, [OP_LDXSH] = &&L_LDXSH,
		[OP_LDXSW] = &&L_LDXSW, [OP_STB] = &&L_STB, [OP_STH] = &&L_STH, [OP_STW] = &&L_STW,
		[OP_STDW] = &&L_STDW, [OP_STXB] = &&L_STXB, [OP_STXH] = &&L_STXH,
		[OP_STXW] = &&L_STXW, [OP_STXDW] = &&L_STXDW,
		[OP_AADD32] = &&L_AADD32, [OP_AOR32] = &&L_AOR32, [OP_AAND32] = &&L_AAND32,
		[OP_AXOR32] = &&L_AXOR32, [OP_AFADD32] = &&L_AFADD32, [OP_AFOR32] = &&L_AFOR32,
		[OP_AFAND32] = &&L_AFAND32, [OP_AFXOR32] = &&L_AFXOR32, [OP_AXCHG32] = &&L_AXCHG32,
		[OP_ACMPXCHG32] = &&L_ACMPXCHG32,
		[OP_AADD64] = &&L_AADD64, [OP_AOR64] = &&L_AOR64, [OP_AAND64] = &&L_AAND64,
		[OP_AXOR64] = &&L_AXOR64, [OP_AFADD64] = &&L_AFADD64, [OP_AFOR64] = &&L_AFOR64,
		[OP_AFAND64] = &&L_AFAND64, [OP_AFXOR64] = &&L_AFXOR64, [OP_AXCHG64] = &&L_AXCHG64,
		[OP_ACMPXCHG64] = &&L_ACMPXCHG64,
		[OP_INVALID] = &&L_INVALID,
	};
	const struct vm_dinsn *const code = r->ex->code;
	const struct vm_dinsn *ip = code;
	vm_helper_fn *const helpers = r->ex->helpers;
	uint64_t reg[11] = {0};
	uint32_t depth = 0;
#if VM_CHECKED
	uint64_t budget = 100000000; /* instructions: unverified programs may loop forever */
#define DISPATCH                                                                        \
	do {                                                                            \
		if (--budget == 0)                                                      \
			return fault(r, (uint32_t)(ip - code), "instruction budget exhausted", 0); \
		goto *labels[ip->op];                                                   \
	} while (0)
#define CHECK(addr, size)                                                               \
	do {                                                                            \
		if (!region_ok(r, (addr), (size)))                                      \
			return fault(r, (uint32_t)(ip - code), "out-of-bounds access", (addr)); \
	} while (0)
#define CHECK_ARGS(id)                                                                  \
	do {                                                                            \
		int bad_ = helper_args_ok(r, (id), reg);                                \
		if (bad_)                                                               \
			return fault(r, (uint32_t)(ip - code), "out-of-bounds helper argument", \
				     reg[bad_]);                                        \
	} while (0)
#else
#define DISPATCH goto *labels[ip->op]
#define CHECK(addr, size) do { } while (0)
#define CHECK_ARGS(id) do { } while (0)
#endif
#define NEXT do { ip++; DISPATCH; } while (0)
#define DST reg[ip->dst]
#define SRC reg[ip->src]
#define K ip->k

	reg[1] = (uintptr_t)r->env.ctx;
	reg[2] = r->env.ctx_size;
	reg[10] = (uintptr_t)(r->stack + VM_STACK_SIZE * VM_MAX_CALL_DEPTH);
	DISPATCH;

	/* ALU: 64-bit results stay, 32-bit ones are zero-extended. */
#define ALU(n, expr64, expr32)                                                           \
	L_##n##64K : { uint64_t a = DST, b = K; (void)a; (void)b; DST = (expr64); NEXT; }   \
	L_##n##64X : { uint64_t a = DST, b = SRC; (void)a; (void)b; DST = (expr64); NEXT; } \
	L_##n##32K : { uint32_t a = (uint32_t)DST, b = (uint32_t)K; (void)a; (void)b;     \
		       DST = (uint32_t)(expr32); NEXT; }                                  \
	L_##n##32X : { uint32_t a = (uint32_t)DST, b = (uint32_t)SRC; (void)a; (void)b;   \
		       DST = (uint32_t)(expr32); NEXT; }
	ALU(ADD, a + b, a + b)
	ALU(SUB, a - b, a - b)
	ALU(MUL, a * b, a * b)
	ALU(DIV, b ? a / b : 0, b ? a / b : 0)
	ALU(SDIV,
	    b == 0 ? 0 : ((int64_t)b == -1 ? 0 - a : (uint64_t)((int64_t)a / (int64_t)b)),
	    b == 0 ? 0 : ((int32_t)b == -1 ? 0 - a : (uint32_t)((int32_t)a / (int32_t)b)))
	ALU(MOD, b ? a % b : a, b ? a % b : a)
	ALU(SMOD,
	    b == 0 ? a : ((int64_t)b == -1 ? 0 : (uint64_t)((int64_t)a % (int64_t)b)),
	    b == 0 ? a : ((int32_t)b == -1 ? 0 : (uint32_t)((int32_t)a % (int32_t)b)))
	ALU(OR, a | b, a | b)
	ALU(AND, a & b, a & b)
	ALU(LSH, a << (b & 63), a << (b & 31))
	ALU(RSH, a >> (b & 63), a >> (b & 31))
	ALU(ARSH, (uint64_t)((int64_t)a >> (b & 63)), (uint32_t)((int32_t)a >> (b & 31)))
	ALU(XOR, a ^ b, a ^ b)
	ALU(MOV, b, b)
	ALU(MOVSX8, (uint64_t)(int64_t)(int8_t)b, (uint32_t)(int32_t)(int8_t)b)
	ALU(MOVSX16, (uint64_t)(int64_t)(int16_t)b, (uint32_t)(int32_t)(int16_t)b)
	ALU(MOVSX32, (uint64_t)(int64_t)(int32_t)b, b)
#undef ALU
L_NEG64:
	DST = 0 - DST;
	NEXT;
L_NEG32:
	DST = (uint32_t)(0 - (uint32_t)DST);
	NEXT;
L_LE16:
	DST = (uint16_t)DST;
	NEXT;
L_LE32:
	DST = (uint32_t)DST;
	NEXT;
L_LE64:
	NEXT;
L_BE16:
	DST = __builtin_bswap16((uint16_t)DST);
	NEXT;
L_BE32:
	DST = __builtin_bswap32((uint32_t)DST);
	NEXT;
L_BE64:
	DST = __builtin_bswap64(DST);
	NEXT;

	/* Conditional jumps: 64-bit or on the low 32 bits. */
#define JMP(n, expr)                                                                      \
	L_##n##64K : { uint64_t a = DST, b = K; ip = (expr) ? code + ip->off : ip + 1; DISPATCH; } \
	L_##n##64X : { uint64_t a = DST, b = SRC; ip = (expr) ? code + ip->off : ip + 1; DISPATCH; } \
	L_##n##32K : { uint32_t a = (uint32_t)DST, b = (uint32_t)K;                         \
		       ip = (expr) ? code + ip->off : ip + 1; DISPATCH; }                   \
	L_##n##32X : { uint32_t a = (uint32_t)DST, b = (uint32_t)SRC;                       \
		       ip = (expr) ? code + ip->off : ip + 1; DISPATCH; }
#define S(x) (sizeof(x) == 4 ? (int64_t)(int32_t)(x) : (int64_t)(x))
	JMP(JEQ, a == b)
	JMP(JNE, a != b)
	JMP(JGT, a > b)
	JMP(JGE, a >= b)
	JMP(JLT, a < b)
	JMP(JLE, a <= b)
	JMP(JSET, (a & b) != 0)
	JMP(JSGT, S(a) > S(b))
	JMP(JSGE, S(a) >= S(b))
	JMP(JSLT, S(a) < S(b))
	JMP(JSLE, S(a) <= S(b))
#undef S
#undef JMP
L_JA:
	ip = code + ip->off;
	DISPATCH;

L_CALL: {
	vm_helper_fn fn = ip->k < VM_MAX_HELPER_ID ? helpers[ip->k] : NULL;
	if (!fn)
		return fault(r, (uint32_t)(ip - code), "call to an unknown helper", ip->k);
	CHECK_ARGS(ip->k);
	reg[0] = fn(&r->env, reg[1], reg[2], reg[3], reg[4], reg[5]);
	if (r->env.stop) {
		*ret = 0;
		return 0;
	}
	NEXT;
}
L_CALLX: {
	uint64_t id = DST;
	vm_helper_fn fn = id < VM_MAX_HELPER_ID ? helpers[id] : NULL;
	if (!fn)
		return fault(r, (uint32_t)(ip - code), "callx to an unknown helper", id);
	CHECK_ARGS(id);
	reg[0] = fn(&r->env, reg[1], reg[2], reg[3], reg[4], reg[5]);
	if (r->env.stop) {
		*ret = 0;
		return 0;
	}
	NEXT;
}
L_CALL_LOCAL: {
	if (depth + 1 >= VM_MAX_CALL_DEPTH)
		return fault(r, (uint32_t)(ip - code), "call depth exceeds 8 frames", 0);
	struct vm_frame *f = &r->frames[depth++];
	f->ret_pc = (uint32_t)(ip - code) + 1;
	memcpy(f->saved, &reg[6], sizeof(f->saved));
	f->fp = reg[10];
	reg[10] -= VM_STACK_SIZE;
	ip = code + ip->off;
	DISPATCH;
}
L_EXIT:
	if (depth == 0) {
		*ret = reg[0];
		return 0;
	}
	{
		struct vm_frame *f = &r->frames[--depth];
		memcpy(&reg[6], f->saved, sizeof(f->saved));
		reg[10] = f->fp;
		ip = code + f->ret_pc;
	}
	DISPATCH;
L_LDDW:
	DST = K;
	ip += 2;
	DISPATCH;

	/* Memory: memcpy keeps unaligned accesses defined; it compiles to one move. */
#define LOAD(n, T, ext)                                                         \
	L_##n : {                                                               \
		uint64_t addr = SRC + (int64_t)ip->off;                         \
		T v;                                                            \
		CHECK(addr, sizeof(T));                                         \
		memcpy(&v, (const void *)(uintptr_t)addr, sizeof(T));           \
		DST = (ext)v;                                                   \
		NEXT;                                                           \
	}
	LOAD(LDXB, uint8_t, uint64_t)
	LOAD(LDXH, uint16_t, uint64_t)
	LOAD(LDXW, uint32_t, uint64_t)
	LOAD(LDXDW, uint64_t, uint64_t)
	LOAD(LDXSB, int8_t, int64_t)
	LOAD(LDXSH, int16_t, int64_t)
	LOAD(LDXSW, int32_t, int64_t)
#undef LOAD
#define STORE(n, T, val)                                                        \
	L_##n : {                                                               \
		uint64_t addr = DST + (int64_t)ip->off;                         \
		T v = (T)(val);                                                 \
		CHECK(addr, sizeof(T));                                         \
		memcpy((void *)(uintptr_t)addr, &v, sizeof(T));                 \
		NEXT;                                                           \
	}
	STORE(STB, uint8_t, K)
	STORE(STH, uint16_t, K)
	STORE(STW, uint32_t, K)
	STORE(STDW, uint64_t, K)
	STORE(STXB, uint8_t, SRC)
	STORE(STXH, uint16_t, SRC)
	STORE(STXW, uint32_t, SRC)
	STORE(STXDW, uint64_t, SRC)
#undef STORE

	/* Atomics.  Fetch forms return the old value in src (zero-extended for 32 bits). */
#define ATOMIC(n, T, builtin, fetch)                                            \
	L_##n : {                                                               \
		uint64_t addr = DST + (int64_t)ip->off;                         \
		CHECK(addr, sizeof(T));                                         \
		T old = builtin((T *)(uintptr_t)addr, (T)SRC, __ATOMIC_SEQ_CST); \
		if (fetch)                                                      \
			SRC = old;                                              \
		NEXT;                                                           \
	}
	ATOMIC(AADD32, uint32_t, __atomic_fetch_add, 0)
	ATOMIC(AOR32, uint32_t, __atomic_fetch_or, 0)
	ATOMIC(AAND32, uint32_t, __atomic_fetch_and, 0)
	ATOMIC(AXOR32, uint32_t, __atomic_fetch_xor, 0)
	ATOMIC(AFADD32, uint32_t, __atomic_fetch_add, 1)
	ATOMIC(AFOR32, uint32_t, __atomic_fetch_or, 1)
	ATOMIC(AFAND32, uint32_t, __atomic_fetch_and, 1)
	ATOMIC(AFXOR32, uint32_t, __atomic_fetch_xor, 1)
	ATOMIC(AXCHG32, uint32_t, __atomic_exchange_n, 1)
	ATOMIC(AADD64, uint64_t, __atomic_fetch_add, 0)
	ATOMIC(AOR64, uint64_t, __atomic_fetch_or, 0)
	ATOMIC(AAND64, uint64_t, __atomic_fetch_and, 0)
	ATOMIC(AXOR64, uint64_t, __atomic_fetch_xor, 0)
	ATOMIC(AFADD64, uint64_t, __atomic_fetch_add, 1)
	ATOMIC(AFOR64, uint64_t, __atomic_fetch_or, 1)
	ATOMIC(AFAND64, uint64_t, __atomic_fetch_and, 1)
	ATOMIC(AFXOR64, uint64_t, __atomic_fetch_xor, 1)
	ATOMIC(AXCHG64, uint64_t, __atomic_exchange_n, 1)
#undef ATOMIC
L_ACMPXCHG32: {
	uint64_t addr = DST + (int64_t)ip->off;
	CHECK(addr, 4);
	uint32_t expected = (uint32_t)reg[0];
	__atomic_compare_exchange_n((uint32_t *)(uintptr_t)addr, &expected, (uint32_t)SRC, 0,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	reg[0] = expected;
	NEXT;
}
L_ACMPXCHG64: {
	uint64_t addr = DST + (int64_t)ip->off;
	CHECK(addr, 8);
	uint64_t expected = reg[0];
	__atomic_compare_exchange_n((uint64_t *)(uintptr_t)addr, &expected, SRC, 0,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	reg[0] = expected;
	NEXT;
}
L_INVALID:
	return fault(r, (uint32_t)(ip - code), "jump into the middle of lddw or past the end", 0);
#undef DISPATCH
#undef CHECK
#undef CHECK_ARGS
#undef NEXT
#undef DST
#undef SRC
#undef K
}
