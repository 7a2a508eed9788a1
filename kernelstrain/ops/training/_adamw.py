"""C++ pieces shared by the adamw_cuda rungs (not an op module itself): the host prototype
(HOST), the step constants and the one-element update (common), the float4 update (VEC4), the
per-tensor host loop and the scalar tail loop.
"""

# The host function's head as every render spells it (the entry's prototype, wrapped).
HOST = """void adamw_step(float* const* params, const scalar_t* const* grads, float* const* exp_avgs,
                float* const* exp_avg_sqs, const int64_t* numels, int num_tensors, float lr, float beta1,
                float beta2, float eps, float weight_decay, int step, cudaStream_t stream) {
    const AdamHyper h = make_hyper(lr, beta1, beta2, eps, weight_decay, step);"""
BC1 = "1.f - powf(beta1, (float)step)"       # the first bias correction missing_scale drops
FITS = "i + 4 <= n"                          # the float4 loop test
# off_by_one: the float4 test drops a tensor's last full group and the tail its last element
OFF_BY_ONE = {"fits": "i + 4 < n", "hi": "n - 1"}


def common(task, bc1: str = BC1) -> str:
    """AdamHyper (the step constants, folded on the host), adamw_update and Grad4."""
    vec = "float4" if task.dtype == "fp32" else "uint2"
    return f"""#include <math.h>

// Step constants folded on the host once: decoupled decay factor and both bias corrections.
struct AdamHyper {{ float beta1, beta2, eps, decay, step_size, inv_bc2_sqrt; }};

static AdamHyper make_hyper(float lr, float beta1, float beta2, float eps, float wd, int step) {{
    const float bc1 = {bc1}, bc2 = 1.f - powf(beta2, (float)step);
    return {{beta1, beta2, eps, 1.f - lr * wd, lr / bc1, 1.f / sqrtf(bc2)}};
}}

// The whole AdamW update of one element, in fp32 registers.
__device__ __forceinline__ void adamw_update(float& p, float g, float& m, float& v, const AdamHyper& h) {{
    p *= h.decay;
    m = h.beta1 * m + (1.f - h.beta1) * g;
    v = h.beta2 * v + (1.f - h.beta2) * g * g;
    p -= h.step_size * m / (sqrtf(v) * h.inv_bc2_sqrt + h.eps);
}}

// Four grads in one load: a float4 for fp32, 8 bytes (uint2) for 16-bit grads.
union Grad4 {{ {vec} u; scalar_t h[4]; }};
"""


def per_tensor_host(launch: str) -> str:
    """The host loop of the per-tensor rungs: one launch per tensor."""
    return f"""
{HOST}
    for (int t = 0; t < num_tensors; ++t) {{  // one launch per tensor: T small kernels
        const int64_t n = numels[t];
        {launch}
    }}
}}
"""


VEC4 = """
// Four consecutive elements: float4 params and moments (16 B) plus one 4-wide grad load.
__device__ __forceinline__ void adamw_update4(float* p, const scalar_t* g, float* m, float* v,
                                              int64_t i, const AdamHyper& h) {
    float4 pv = *reinterpret_cast<float4*>(p + i), mv = *reinterpret_cast<float4*>(m + i);
    float4 vv = *reinterpret_cast<float4*>(v + i);
    Grad4 gv; gv.u = *reinterpret_cast<const decltype(gv.u)*>(g + i);
    adamw_update(pv.x, to_float(gv.h[0]), mv.x, vv.x, h);
    adamw_update(pv.y, to_float(gv.h[1]), mv.y, vv.y, h);
    adamw_update(pv.z, to_float(gv.h[2]), mv.z, vv.z, h);
    adamw_update(pv.w, to_float(gv.h[3]), mv.w, vv.w, h);
    *reinterpret_cast<float4*>(p + i) = pv; *reinterpret_cast<float4*>(m + i) = mv;
    *reinterpret_cast<float4*>(v + i) = vv;
}
"""



def tail(lo: str = "(n & ~(int64_t)3)", hi: str = "n") -> str:
    """The scalar loop over a tensor's last n % 4 elements."""
    return f"for (int64_t i = {lo} + threadIdx.x; i < {hi}; i += blockDim.x)  // < 4 leftovers\n" \
               "            adamw_update(p[i], to_float(g[i]), m[i], v[i], h);"
