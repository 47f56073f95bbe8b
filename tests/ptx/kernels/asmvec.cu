// Fixture: inline PTX and vector loads/stores (ld.global.v4.f32 inside and outside asm).
extern "C" __global__ void asm_vec(const float4 *in, float4 *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float4 v = in[i];
	float x, y, z, w;
	asm volatile("{\n\t.reg .pred p;\n\t"
		     "ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n\t"
		     "setp.ne.s32 p, %5, 0;\n\t"
		     "@p add.f32 %0, %0, 1.0;\n\t}"
		     : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
		     : "l"(in + i), "r"(i & 1));
	unsigned lane;
	asm("mov.u32 %0, %%laneid;" : "=r"(lane));
	out[i] = make_float4(v.x + x, v.y + y, v.z * z, v.w + w + (float)(lane & 0));
}
