"""Device helpers the MoE CUDA modules share: warp peer masks (lanes holding the same key) and
the stable in-block rank built on them."""


def peers(task) -> str:
    if not task.dialect.match_any:       # algorithmic: AMD has no match_any, peel one key per round
        return """typedef unsigned long long lane_mask_t;
// Lanes of this wavefront holding the same key. No match_any on AMD: peel one key per round.
__device__ __forceinline__ lane_mask_t peers_of(int key) {
    lane_mask_t todo = __ballot(1), peers = 0;
    while (todo) {
        const int leader_key = __shfl(key, __ffsll((long long)todo) - 1);
        const lane_mask_t same = __ballot(key == leader_key);
        if (key == leader_key) peers = same;
        todo &= ~same;
    }
    return peers;
}
__device__ __forceinline__ int mask_popc(lane_mask_t m) { return __popcll(m); }
"""
    return """typedef unsigned int lane_mask_t;
// Lanes of this warp holding the same key (sm_70+: one instruction).
__device__ __forceinline__ lane_mask_t peers_of(int key) { return __match_any_sync(0xffffffffu, key); }
__device__ __forceinline__ int mask_popc(lane_mask_t m) { return __popc(m); }
"""


# Stable rank of one round of THREADS consecutive assignments; adds run[e] from earlier rounds.
RANK_ROUND = """
// Rank of assignment a among the block's earlier assignments of the same expert:
// earlier rounds (run[e]) + earlier warps of this round (warp_cnt) + earlier lanes (peer mask).
__device__ __forceinline__ int rank_round(int e, int (*warp_cnt)[E_MAX], const int* run) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const lane_mask_t peers = peers_of(e);                 // every lane takes part (e = -1 past the end)
    const int in_warp = mask_popc(peers & ((((lane_mask_t)1) << lane) - 1));
    if (e >= 0 && in_warp == 0) warp_cnt[warp][e] = mask_popc(peers);   // lowest peer speaks for the warp
    __syncthreads();
    int rank = -1;
    if (e >= 0) {
        rank = run[e] + in_warp;
        for (int w = 0; w < warp; ++w) rank += warp_cnt[w][e];
    }
    return rank;
}
"""


def starts_read_past_warp0(task, p) -> bool:
    """Whether a reader of moe_scan's start[] sits outside warp 0, where moe_scatter_cuda's missing_barrier
    (PUBLISH_STARTS dropped) races: thread 0 scans start[] and warp 0's other lanes wait for it where the branch
    reconverges. The readers: threads 0..E (offsets)
    and those below blocks x E (the block bases). At T 16, E 8 all are in warp 0, and an H100 passed the bug in
    3 of 3 runs at 128 and at 512 threads (labels j1). Thread 0's serial scan is E dependent shared-memory adds: at
    E 8 the H100 passed the race at T 4096 too (readers in 8 warps; 3 of 3 runs at 128, 256 and 512 threads, labels
    k3), so it is offered only where the scan is long (E >= 64)."""
    blocks = -(-task["T"] * task["topk"] // p["threads"])
    return max(task["E"] + 1, blocks * task["E"]) > 32 and task["E"] >= 64
