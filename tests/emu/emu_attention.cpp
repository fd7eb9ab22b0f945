/* emu_attention.cpp — kvsim's CUDA attention kernels (kernels/cuda_decode.cu and cuda_prefill.cu,
 * rewritten by emu_transform.py and compiled against cuda_emu.h) run on the
 * host and compared with a double-precision reference on the same fp16
 * inputs: decode (split-KV plan, cp.async tiles, heads across warps) and
 * prefill (both kernels: mma.sync fragments in registers, and WMMA tiles;
 * online softmax, causal skipping) over GQA groups
 * 1-12, head_dim 32/64/128, block sizes 1-32, contexts at the tile and
 * partition edges, a 6,000-token split decode, chunks over stored context.
 * Bound: NMSE <= 1e-5 per op (the GPU suite's bound).  Exit 0 when every
 * case passes.  Built and run by tests/check_cuda_emu.sh. */
#include "cuda_internal_emu.h"

#include <cstdarg>
#include <random>

/* ------------------------------------------------------- runtime */
namespace emu {
block_ctx *cur_block;
thread_local thread_ctx *cur_thread;

void launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &kernel)
{
    const unsigned nt = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || nt == 0 || nt > 1024 || nt % 32) {
        fprintf(stderr, "emu: unsupported block (%u, %u, %u)\n", block.x, block.y, block.z);
        exit(2);
    }
    blockDim = block;
    gridDim = grid;
    block_ctx ctx;
    pthread_barrier_init(&ctx.block_bar, NULL, nt);
    for (unsigned w = 0; w < nt / 32; w++)
        pthread_barrier_init(&ctx.warp_bar[w], NULL, 32);
    std::vector<unsigned char> dyn(smem + 256);
    ctx.dyn_smem = (unsigned char *)(((uintptr_t)dyn.data() + 127) & ~(uintptr_t)127);
    cur_block = &ctx;
    /* one thread per CUDA thread for the whole grid: blocks one after the
     * other, all threads of a block finished before the next starts */
    pthread_barrier_t between;
    pthread_barrier_init(&between, NULL, nt);
    const size_t nb = (size_t)grid.x * grid.y * grid.z;
    std::vector<std::thread> th;
    th.reserve(nt);
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([&, t] {
            thread_ctx tc;
            tc.tid = t;
            cur_thread = &tc;
            threadIdx = dim3(t, 0, 0);
            for (size_t b = 0; b < nb; b++) {
                if (t == 0)
                    memset(dyn.data(), 0xa5, dyn.size()); /* garbage, as on a GPU */
                pthread_barrier_wait(&between);
                blockIdx = dim3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                (unsigned)(b / grid.x / grid.y));
                kernel();
                emu_cp_wait(0);
                pthread_barrier_wait(&between);
            }
        });
    for (auto &t : th)
        t.join();
    pthread_barrier_destroy(&between);
    pthread_barrier_destroy(&ctx.block_bar);
    for (unsigned w = 0; w < nt / 32; w++)
        pthread_barrier_destroy(&ctx.warp_bar[w]);
}
} // namespace emu

thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

int cu_errf(kvs_err *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}
int cu_check(cudaError_t e, const char *what, kvs_err *err)
{
    return e == cudaSuccess ? KVS_OK : cu_errf(err, KVS_EDEVICE, "%s failed", what);
}
int cu_check_launch(const char *what, kvs_err *err) { return cu_check(0, what, err); }
int cu_scratch(cuda_state *st, size_t bytes, void **out, kvs_err *err)
{
    (void)err;
    if (bytes > st->scratch_bytes) {
        free(st->scratch);
        st->scratch = malloc(bytes);
        st->scratch_bytes = bytes;
        memset(st->scratch, 0xa5, bytes);
    }
    *out = st->scratch;
    return KVS_OK;
}

/* ------------------------------------------------------- a case */
struct seq {
    int q, c;
};

static double run_case(const char *label, int heads, int kvh, int hd, int bs,
                       const std::vector<seq> &seqs, int sm_count, bool decode, unsigned seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    const int n = (int)seqs.size(), W = (heads + 2 * kvh) * hd, row = kvh * hd;
    std::vector<int32_t> qstart(n + 1, 0), ctx(n), bt_off(n), tables, idx;
    int blocks = 0, T = 0, max_q = 0, max_ctx = 0;
    for (int i = 0; i < n; i++) {
        qstart[i] = T;
        T += seqs[i].q;
        ctx[i] = seqs[i].c + seqs[i].q;
        bt_off[i] = blocks;
        blocks += (ctx[i] + bs - 1) / bs;
    }
    qstart[n] = T;
    /* scattered blocks: a permutation of the pool */
    std::vector<int32_t> perm(blocks + 5);
    for (size_t i = 0; i < perm.size(); i++)
        perm[i] = (int32_t)i;
    std::shuffle(perm.begin(), perm.end(), rng);
    tables.assign(perm.begin(), perm.begin() + blocks);
    const int pool = (int)perm.size();
    std::vector<__half> kp((size_t)pool * bs * row), vp(kp.size()), qkv((size_t)T * W);
    for (auto &h : kp)
        h = __float2half(U(rng));
    for (auto &h : vp)
        h = __float2half(U(rng));
    for (auto &h : qkv)
        h = __float2half(U(rng));
    std::vector<__half> out((size_t)T * heads * hd, __float2half(777.0f));
    for (int i = 0; i < n; i++)
        if ((seqs[i].q == 1) == decode) {
            idx.push_back(i);
            max_q = std::max(max_q, seqs[i].q);
            max_ctx = std::max(max_ctx, ctx[i]);
        }
    if (idx.empty())
        return 0.0;
    kernels_attn_args a;
    memset(&a, 0, sizeof a);
    a.qkv = qkv.data();
    a.k_pool = kp.data();
    a.v_pool = vp.data();
    a.out = out.data();
    a.seq_idx = a.host_seq_idx = idx.data();
    a.seq_qstart = a.host_seq_qstart = qstart.data();
    a.seq_ctx = a.host_seq_ctx = ctx.data();
    a.seq_bt = bt_off.data();
    a.block_tables = tables.data();
    a.n = (int64_t)idx.size();
    a.max_q = max_q;
    a.max_ctx = max_ctx;
    a.heads = heads;
    a.kv_heads = kvh;
    a.head_dim = hd;
    a.block_size = bs;
    a.scale = 1.0f / sqrtf((float)hd);
    cuda_state st;
    memset(&st, 0, sizeof st);
    st.sm_count = sm_count;
    kvs_err err;
    memset(&err, 0, sizeof err);
    int rc = decode ? cu_decode_attention(&st, &a, &err) : cu_prefill_attention(&st, &a, &err);
    free(st.scratch);
    if (rc != KVS_OK) {
        printf("FAIL %s: %s\n", label, err.msg);
        return 1.0;
    }
    /* reference in double on the fp16 values */
    double e = 0, s = 0;
    const int G = heads / kvh;
    for (int i : idx) {
        const int c = seqs[i].c, q = seqs[i].q;
        for (int j = 0; j < q; j++)
            for (int h = 0; h < heads; h++) {
                const int g = h / G, keys = c + j + 1;
                std::vector<double> sc(keys);
                double mx = -INFINITY, sum = 0;
                const __half *qv = &qkv[(size_t)(qstart[i] + j) * W + (size_t)h * hd];
                for (int t = 0; t < keys; t++) {
                    size_t off = ((size_t)tables[bt_off[i] + t / bs] * bs + t % bs) * row +
                                 (size_t)g * hd;
                    double d = 0;
                    for (int x = 0; x < hd; x++)
                        d += (double)__half2float(qv[x]) * __half2float(kp[off + x]);
                    sc[t] = d / sqrt((double)hd);
                    mx = std::max(mx, sc[t]);
                }
                for (int t = 0; t < keys; t++)
                    sum += sc[t] = exp(sc[t] - mx);
                for (int x = 0; x < hd; x++) {
                    double o = 0;
                    for (int t = 0; t < keys; t++) {
                        size_t off = ((size_t)tables[bt_off[i] + t / bs] * bs + t % bs) * row +
                                     (size_t)g * hd;
                        o += sc[t] * __half2float(vp[off + x]);
                    }
                    o /= sum;
                    double got = __half2float(out[(size_t)(qstart[i] + j) * heads * hd +
                                                  (size_t)h * hd + x]);
                    e += (got - o) * (got - o);
                    s += o * o;
                }
            }
    }
    /* rows of the other kind must be untouched */
    for (int i = 0; i < n; i++)
        if ((seqs[i].q == 1) != decode)
            for (int j = 0; j < seqs[i].q * heads * hd; j++)
                if (out[(size_t)qstart[i] * heads * hd + j].x != __float2half(777.0f).x) {
                    printf("FAIL %s: wrote a row of sequence %d (not served)\n", label, i);
                    return 1.0;
                }
    return s > 0 ? e / s : e;
}

/* argv[1] == "quick": a subset for the test suite (a few minutes less) */
int main(int argc, char **argv)
{
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    struct shape {
        int heads, kvh, hd;
    };
    const shape shapes[] = {{4, 4, 32},  {8, 2, 128}, {16, 1, 64}, {4, 2, 64},  {6, 2, 128},
                            {12, 3, 128}, {12, 2, 64}, {10, 1, 32}, {16, 2, 128}, {24, 2, 128}};
    const std::vector<seq> edges = {{1, 31}, {1, 32}, {1, 255}, {65, 0}, {1, 256},
                                    {33, 31}, {64, 1}, {1, 512}, {2, 500}, {5, 63}};
    int fails = 0, cases = 0;
    double worst = 0;
    auto check = [&](const char *label, const shape &sh, int bs, const std::vector<seq> &ss,
                     int sm) {
        /* kind 0: prefill (mma.sync kernel), 1: decode (mma.sync for GQA
         * groups of 4 and more), 2: prefill on the WMMA kernel
         * (KVSIM_CUDA_PREFILL=wmma, read at each launch), 3: decode of such
         * groups on the SIMT kernel (KVSIM_CUDA_DECODE=simt) */
        for (int kind = 0; kind < 4; kind++) {
            if (kind == 3 && sh.heads / sh.kvh < 4)
                continue; /* the same kernel as kind 1 */
            const char *var = kind == 2 ? "KVSIM_CUDA_PREFILL" : "KVSIM_CUDA_DECODE";
            if (kind >= 2 && setenv(var, kind == 2 ? "wmma" : "simt", 1) != 0)
                exit(2);
            double e = run_case(label, sh.heads, sh.kvh, sh.hd, bs, ss, sm, kind % 2 == 1,
                                (unsigned)(cases + 1));
            if (kind >= 2 && unsetenv(var) != 0)
                exit(2);
            cases++;
            worst = std::max(worst, e);
            bool ok = e <= 1e-5;
            fails += !ok;
            printf("%s %-44s %-7s %2d/%d heads hd %3d bs %2d sms %3d: NMSE %.2e\n",
                   ok ? "ok  " : "FAIL", label,
                   kind == 1 ? "decode" : kind == 2 ? "pf-wmma" : kind == 3 ? "dc-simt" : "prefill",
                   sh.heads, sh.kvh,
                   sh.hd, bs, sm, e);
        }
    };
    int k = 0;
    for (const shape &sh : shapes)
        if (!quick || k++ % 3 == 0) /* quick: MHA 32, group 2 (64), group 6 (64), group 12 */
            check("tile/partition edges", sh, 16, edges, 132);
    const int sizes[] = {1, 2, 3, 8, 16, 32};
    for (int b : sizes) {
        if (quick && b != 1 && b != 32)
            continue;
        std::vector<seq> ss = {{1, std::max(b - 1, 1)}, {1, b}, {1, b + 1}, {1, 4 * b + 63},
                               {7, 2 * b}, {40, 3}};
        check("block sizes", shapes[1], b, ss, 132);
    }
    check("6,000-token split decode", shapes[1], 16, {{1, 5999}, {1, 17}, {1, 300}}, 132);
    if (!quick) {
        check("6,000-token decode, few SMs (long partitions)", shapes[1], 16, {{1, 5999}, {1, 17}},
              1);
        check("long prompt over a cache", shapes[5], 16, {{130, 70}, {1, 1000}}, 132);
    }
    printf("%d of %d cases within NMSE 1e-5 (worst %.2e)\n", cases - fails, cases, worst);
    return fails ? 1 : 0;
}
