/* cost_roofline.c — the roofline step-cost model.
 *
 * step_s = step_overhead_s + sum over the ops of model.h (each times its
 * repeats) of max(FLOPs / (peak_flops * eff), bytes / (hbm_Bps * eff_hbm));
 * collectives take collective_lat_s + bytes / (nvlink_Bps * eff_nvlink), or
 * bytes / (host_link_Bps * eff_pcie) on a GPU without NVLink.
 * peak_flops is the GPU's peak for the weights' precision (gpu_peak_flops:
 * FP8 weights on an FP8 GPU take its FP8 peak times eff_fp8; fp16/bf16 and LLaMA-style
 * shapes take fp16_flops, as before), for GEMMs and attention alike; with
 * quant_experts_only only the expert GEMMs do, the rest take the FP16 peak.
 * Ops whose bytes are not affine in the batch sums (MoE experts touched,
 * sliding-window caps; model_op_is_nonlinear) are evaluated per step.
 * Every constant lives in cost_roofline_consts_default below, with its
 * source; docs/cost-models.md explains them.  O(MODEL_OP_COUNT) per step.
 */
#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cost_roofline_consts_default(cost_roofline_consts *c)
{
    /* Large FP16 GEMMs through cuBLAS sustain roughly 65-80% of the
     * datasheet tensor peak on A100/H100; 0.7 is the middle of that range. */
    c->eff_gemm = 0.7;
    /* FlashAttention-2 (Dao, 2023) reports 50-73% of the A100's peak for its
     * forward pass; serving kernels (variable lengths, paged KV) sit at the
     * low end, so 0.5. */
    c->eff_attn = 0.5;
    /* Streaming kernels (copies, GEMV-shaped decode GEMMs, paged attention)
     * reach about 80-90% of peak HBM bandwidth; 0.8 is the usual planning
     * figure for memory-bound LLM decode. */
    c->eff_hbm = 0.8;
    /* nccl-tests all_reduce on 8 NVLink A100s reports a bus bandwidth near
     * 230 GB/s of the 300 GB/s per direction: about 0.75. */
    c->eff_nvlink = 0.75;
    /* A small-message NCCL all-reduce inside one NVLink node costs on the
     * order of 10 us (vLLM's custom all-reduce does better, NCCL rings on
     * 8 GPUs worse); it dominates decode all-reduces, whose payload is tiny. */
    c->collective_lat_s = 10e-6;
    /* vLLM's multi-step scheduling RFC (vllm-project/vllm#6854) measured
     * about 4 ms of GPU idle time per decode step spent on scheduling, input
     * preparation and output processing in the V0 engine; 3 ms sits a
     * little below since small batches carry less of that work. */
    c->step_overhead_s = 3e-3;
    /* Off by default (V0 keeps its figures); the vllm-v1 and trtllm
     * profiles set them (job/job_engine.c, docs/cost-models.md). */
    c->step_overhead_seq_s = 0.0;
    c->kernel_lat_s = 0.0;
    c->collective_lat_peer_s = 0.0;
    c->gemm_dim_half = 0.0;
    /* A GPU without NVLink (L40S, L4, A10G, H100 PCIe) all-reduces over
     * PCIe through the host's root complexes, and what it reaches is set by
     * the host, not the link: NVIDIA/nccl issue #1639 (2025-03-14) measured
     * an all_reduce_perf bus bandwidth of 35 GB/s on 4 and 28 GB/s on 8
     * PCIe Gen5 GPUs (64 GB/s per direction per link: 0.55 and 0.44), and
     * the NCCL maintainer's answer there is that on PCIe systems the CPU
     * and memory bound it.  0.5 is the middle.  Only such GPUs use it. */
    c->eff_pcie = 0.5;
    /* Today's GQA decode kernels load each KV head once for all the query
     * heads that share it; TensorRT-LLM before its XQA kernel (blog
     * "New XQA-kernel provides 2.4x more Llama-70B throughput", 2024-01-30)
     * read it once per query head.  0: read once. */
    c->kv_reread = 0.0;
    /* 0: an op takes max(compute, memory), the plain roofline. */
    c->ridge_loss = 0.0;
    /* FP8 GEMMs on Hopper reach a smaller share of their peak than BF16
     * ones of theirs: 1,378-1,523 TFLOP/s of the H800's 1,979 for M = N =
     * 8192, K = 4096-16384 (tilelang's benchmark/matmul_fp8/README.md),
     * "up to 1550" at best (DeepGEMM's README), i.e. 68-78%, against ~79%
     * for BF16 at 4096^3 (783 TFLOP/s of 989 in XLA's sm_90 matmul table);
     * the ratio is 0.86-0.99, its top a best case: 0.9
     * (docs/cost-models.md). */
    c->eff_fp8 = 0.9;
}

/* An op's time from its compute and memory times: the larger, plus the
 * ridge_loss share of the smaller (a = 0: exactly the larger). */
static double op_time(double c, double m, double a)
{
    return c > m ? c + a * m : m + a * c;
}

/* 1 when the GPU's collectives run over PCIe: its peer link is no faster
 * than its host link (the built-in PCIe parts list the PCIe figure as both). */
static int link_is_pcie(const gpu_spec *g) { return g->nvlink_Bps <= g->host_link_Bps; }

/* Each op's FLOPs and bytes are affine in the batch features (tokens,
 * kv_read, prefill_sq, n_prefill, n_decode) over valid batches (tokens >=
 * n_decode), so step_s evaluates precomputed coefficients instead of calling
 * model_op_cost for every op of every step.  roofline_ops keeps the direct
 * computation; tests/test_cost.c checks that both agree. */
#define RF_NFEAT 6 /* constant, tokens, kv_read, prefill_sq, n_prefill, n_decode */

typedef struct roofline {
    model_spec m;
    gpu_spec g;
    int64_t tp;
    model_par p;                     /* tp, ep, cp */
    double peak[MODEL_OP_COUNT];     /* FLOP/s each op's compute runs at (FP8 ops: times
                                        eff_fp8) */
    int fp8;                         /* 1: some op runs at the GPU's FP8 peak */
    double shape[MODEL_OP_COUNT];    /* 1 / (rate factor of a narrow GEMM), >= 1 */
    double kv_extra;                 /* bytes per layer per context token decode attention
                                        re-reads: kv_reread * (group - 1) * K and V */
    double link_Bps;                 /* bytes/s a collective moves: NVLink * eff_nvlink,
                                        or the host link * eff_pcie (link_is_pcie) */
    cost_roofline_consts k;
    int64_t repeats[MODEL_OP_COUNT]; /* instances of each op per step */
    double cs[MODEL_OP_COUNT][RF_NFEAT]; /* compute seconds per feature unit */
    double ms[MODEL_OP_COUNT][RF_NFEAT]; /* memory/link seconds per feature unit */
    double cached_kv_s; /* ATTN_PREFILL memory seconds per token of stored KV
                           a prefill chunk reads (cost_batch.prefill_cached) */
    int nonlinear[MODEL_OP_COUNT]; /* 1: evaluated per step (repeats > 0 and
                                      model_op_is_nonlinear) */
    int any_nonlinear;             /* some op is */
    /* the linear ops' nonzero terms, in order (roofline_terms): a zero
     * coefficient adds +0.0, which changes no sum, so skipping it is exact */
    int lin_ops[MODEL_OP_COUNT];   /* linear ops with a nonzero coefficient */
    int n_lin_ops;
    int8_t feat[MODEL_OP_COUNT][RF_NFEAT]; /* op's features with cs or ms != 0 */
    int n_feat[MODEL_OP_COUNT];
} roofline;

/* Index the nonzero terms of the linear ops (after roofline_precompute). */
static void roofline_terms(roofline *r)
{
    r->n_lin_ops = 0;
    for (int i = 0; i < MODEL_OP_COUNT; i++) {
        r->n_feat[i] = 0;
        for (int f = 0; f < RF_NFEAT; f++)
            if (r->cs[i][f] != 0.0 || r->ms[i][f] != 0.0)
                r->feat[i][r->n_feat[i]++] = (int8_t)f;
        if (!r->nonlinear[i] && r->n_feat[i] > 0)
            r->lin_ops[r->n_lin_ops++] = i;
    }
}

static double op_eff_flops(const roofline *r, model_op op)
{
    return op == MODEL_OP_ATTN_PREFILL || op == MODEL_OP_ATTN_DECODE ||
                   op == MODEL_OP_ATTN_PREFILL_SWA || op == MODEL_OP_ATTN_DECODE_SWA
               ? r->k.eff_attn
               : r->k.eff_gemm;
}

/* Fill per-op compute and memory seconds (summed over repeats).  A prefill
 * chunk of q tokens over c stored ones (docs/semantics-extensions.md, C)
 * does the attention FLOPs of prefill_sq + 2*prefill_ctx (q*(c + q/2)
 * query-key pairs) and also reads the c stored tokens' K and V. */
static void roofline_ops(const roofline *r, const cost_batch *b, double *cs, double *ms)
{
    const model_op_counts c = {b->tokens, b->kv_read, b->prefill_sq + 2 * b->prefill_ctx,
                               b->n_prefill, b->n_decode};
    for (int i = 0; i < MODEL_OP_COUNT; i++) {
        model_op op = (model_op)i;
        double n = (double)r->repeats[i], flops, bytes;
        cs[i] = ms[i] = 0;
        if (n == 0)
            continue;
        model_op_cost_par(&r->m, &r->p, op, &c, &flops, &bytes);
        if (model_op_is_collective(op)) {
            double peers = r->tp > 2 ? (double)(r->tp - 2) : 0.0;
            ms[i] = n * (r->k.collective_lat_s + r->k.collective_lat_peer_s * peers +
                         bytes / r->link_Bps);
        } else {
            if (op == MODEL_OP_ATTN_DECODE && r->kv_extra > 0) /* K/V re-read per head */
                bytes += r->kv_extra * (double)c.kv_read;
            cs[i] = n * flops / (r->peak[i] * op_eff_flops(r, op));
            ms[i] = n * bytes / (r->g.hbm_Bps * r->k.eff_hbm);
            if (r->shape[i] != 1.0) { /* a narrow GEMM runs at 1/shape of its rate */
                cs[i] *= r->shape[i];
                ms[i] *= r->shape[i];
            }
            if (r->k.kernel_lat_s > 0) { /* a kernel's fixed time adds to both bounds */
                cs[i] += n * r->k.kernel_lat_s;
                ms[i] += n * r->k.kernel_lat_s;
            }
        }
    }
    ms[MODEL_OP_ATTN_PREFILL] += r->cached_kv_s * (double)b->prefill_cached;
}

/* The smaller per-GPU weight dimension of a dense LLaMA-style GEMM, or 0
 * for the ops it does not describe (attention, MoE, MLA projections). */
static double gemm_dim(const model_spec *m, int64_t tp, model_op op)
{
    if (m->attn_type == MODEL_ATTN_MLA && (op == MODEL_OP_QKV || op == MODEL_OP_O_PROJ))
        return 0;
    const double H = (double)m->hidden, hd = (double)m->head_dim;
    const double q = (double)m->heads / (double)tp * hd;
    const double kv = 2.0 * (double)model_kv_heads_per_gpu(m, tp) * hd;
    const double I = (double)m->intermediate / (double)tp;
    switch (op) {
    case MODEL_OP_QKV: return fmin(H, q + kv);
    case MODEL_OP_O_PROJ: return fmin(q, H);
    case MODEL_OP_MLP_GATE_UP: return fmin(H, 2.0 * I);
    case MODEL_OP_MLP_DOWN: return fmin(I, H);
    case MODEL_OP_LM_HEAD: return fmin(H, (double)m->vocab / (double)tp);
    default: return 0;
    }
}

/* Derive the affine coefficients from roofline_ops at basis batches. */
static void roofline_precompute(roofline *r)
{
    const cost_batch basis[RF_NFEAT] = {
        {0}, {.tokens = 1}, {.kv_read = 1}, {.prefill_sq = 1}, {.n_prefill = 1},
        {.tokens = 1, .n_decode = 1}, /* a decode brings its token */
    };
    double c0[MODEL_OP_COUNT], m0[MODEL_OP_COUNT], c[MODEL_OP_COUNT], m[MODEL_OP_COUNT];
    roofline_ops(r, &basis[0], c0, m0);
    for (int i = 0; i < MODEL_OP_COUNT; i++) {
        r->cs[i][0] = c0[i];
        r->ms[i][0] = m0[i];
    }
    for (int f = 1; f < RF_NFEAT; f++) {
        roofline_ops(r, &basis[f], c, m);
        for (int i = 0; i < MODEL_OP_COUNT; i++) {
            r->cs[i][f] = c[i] - c0[i];
            r->ms[i][f] = m[i] - m0[i];
        }
    }
    /* the n_decode basis carried one token: take the token's share out */
    for (int i = 0; i < MODEL_OP_COUNT; i++) {
        r->cs[i][5] -= r->cs[i][1];
        r->ms[i][5] -= r->ms[i][1];
    }
}

/* A step's CPU part (the engine's, not the GPU's): step_overhead_s plus
 * step_overhead_seq_s per request; the first term of roofline_step_s and of
 * a cost_run. */
static double cpu_s(const roofline *r, const cost_batch *b)
{
    return r->k.step_overhead_s +
           r->k.step_overhead_seq_s * (double)(b->n_prefill + b->n_decode);
}

static double roofline_step_s(void *self, const cost_batch *b)
{
    const roofline *r = self;
    if (b->tokens <= 0 && b->n_prefill <= 0 && b->n_decode <= 0)
        return 0.0; /* an empty step takes no time (semantics, 3.7) */
    const double x[RF_NFEAT] = {1.0, (double)b->tokens, (double)b->kv_read,
                                (double)(b->prefill_sq + 2 * b->prefill_ctx),
                                (double)b->n_prefill, (double)b->n_decode};
    double s = cpu_s(r, b);
    for (int k = 0; k < r->n_lin_ops; k++) { /* nonlinear ops: below */
        const int i = r->lin_ops[k];
        double c = 0.0, m = 0.0;
        for (int j = 0; j < r->n_feat[i]; j++) {
            const int f = r->feat[i][j];
            c += r->cs[i][f] * x[f];
            m += r->ms[i][f] * x[f];
        }
        s += op_time(c, m, r->k.ridge_loss);
    }
    if (b->prefill_cached > 0) {
        /* prefill attention also reads the chunks' stored K and V: redo its
         * max(compute, memory) with that traffic */
        const int i = MODEL_OP_ATTN_PREFILL;
        double c = 0.0, m = r->cached_kv_s * (double)b->prefill_cached;
        for (int f = 0; f < RF_NFEAT; f++) {
            c += r->cs[i][f] * x[f];
            m += r->ms[i][f] * x[f];
        }
        s += op_time(c, m, r->k.ridge_loss) -
             op_time(c, m - r->cached_kv_s * (double)b->prefill_cached, r->k.ridge_loss);
    }
    if (r->any_nonlinear) {
        double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
        roofline_ops(r, b, cs, ms);
        for (int i = 0; i < MODEL_OP_COUNT; i++)
            if (r->nonlinear[i])
                s += op_time(cs[i], ms[i], r->k.ridge_loss);
    }
    return s;
}

/* cost_model_vt.overhead_s: the CPU part (0 for an empty step, as
 * roofline_step_s). */
static double roofline_overhead_s(void *self, const cost_batch *b)
{
    if (b->tokens <= 0 && b->n_prefill <= 0 && b->n_decode <= 0)
        return 0.0;
    return cpu_s(self, b);
}

/* cost_run's terms for a decode batch (no prefill features): each linear
 * op's compute and memory sums of roofline_step_s split around the
 * kv_read term, the ops before the first one that reads the KV summed into
 * s0 in roofline_step_s's order.  Declines (0) prefill batches and models
 * with nonlinear ops. */
typedef struct rf_term {
    double t;                     /* the op's time when it reads no KV, s */
    double c_pre, c_kv, c_post;   /* compute s, s per token of kv_read, s */
    double m_pre, m_kv, m_post;   /* memory s, s per token of kv_read, s */
    int kv;                       /* 1: depends on kv_read */
} rf_term;

static int roofline_run_init(void *self, const cost_batch *b, cost_run *out)
{
    const roofline *r = self;
    if (r->any_nonlinear || b->n_decode <= 0 || b->prefill_sq != 0 || b->prefill_ctx != 0 ||
        b->n_prefill != 0 || b->prefill_cached != 0)
        return 0;
    const double x[RF_NFEAT] = {1.0, (double)b->tokens, 0.0, 0.0, 0.0, (double)b->n_decode};
    double s = cpu_s(r, b);
    int n = -1; /* terms after s0; -1 until the first kv term */
    int nkv = 0;
    for (int k = 0; k < r->n_lin_ops; k++) {
        const int i = r->lin_ops[k];
        rf_term e = {0};
        double *c = &e.c_pre, *m = &e.m_pre;
        int post = 0; /* terms in the post sums */
        for (int j = 0; j < r->n_feat[i]; j++) {
            const int f = r->feat[i][j];
            if (f == 2) { /* kv_read: what follows is the post sum */
                e.kv = 1;
                e.c_kv = r->cs[i][f];
                e.m_kv = r->ms[i][f];
                c = &e.c_post;
                m = &e.m_post;
                continue;
            }
            if (x[f] == 0.0) /* adds +-0: no change */
                continue;
            if (c == &e.c_post && post++ > 0) /* (c_pre + kv) + a + b is not one post sum */
                return 0;
            *c += r->cs[i][f] * x[f];
            *m += r->ms[i][f] * x[f];
        }
        if (!e.kv) {
            e.t = op_time(e.c_pre, e.m_pre, r->k.ridge_loss);
            if (n < 0) {
                s += e.t;
                continue;
            }
        } else if (n < 0) {
            n = 0;
        }
        if (n >= COST_RUN_TERMS || (e.kv && nkv >= COST_RUN_KV))
            return 0;
        out->t[n] = e.kv ? 0.0 : e.t;
        out->kvi[n] = (int8_t)(e.kv ? nkv : -1);
        if (e.kv)
            out->kv[nkv++] = (cost_run_kv){e.c_pre, e.c_kv, e.c_post, e.m_pre, e.m_kv, e.m_post};
        n++;
    }
    out->s0 = s;
    out->ridge = r->k.ridge_loss;
    out->n = n < 0 ? 0 : n;
    return 1;
}

static void roofline_describe(void *self, char *buf, size_t n)
{
    const roofline *r = self;
    char par[64] = ""; /* only when used: LLaMA runs keep their description */
    if (r->p.ep > 1 || r->p.cp > 1)
        snprintf(par, sizeof par, " ep=%lld cp=%lld", (long long)r->p.ep, (long long)r->p.cp);
    snprintf(buf, n,
             "roofline model=%s gpu=%s tp=%lld%s eff_gemm=%g eff_attn=%g eff_hbm=%g "
             "eff_nvlink=%g collective_lat_s=%g step_overhead_s=%g",
             r->m.name, r->g.name, (long long)r->tp, par, r->k.eff_gemm, r->k.eff_attn,
             r->k.eff_hbm, r->k.eff_nvlink, r->k.collective_lat_s, r->k.step_overhead_s);
    size_t len = strlen(buf);
    if (len < n && (r->k.step_overhead_seq_s > 0 || r->k.kernel_lat_s > 0 ||
                    r->k.collective_lat_peer_s > 0 || r->k.gemm_dim_half > 0))
        snprintf(buf + len, n - len, " step_overhead_seq_s=%g kernel_lat_s=%g "
                 "collective_lat_peer_s=%g gemm_dim_half=%g", r->k.step_overhead_seq_s,
                 r->k.kernel_lat_s, r->k.collective_lat_peer_s, r->k.gemm_dim_half);
    len = strlen(buf);
    if (len < n && r->tp > 1 && link_is_pcie(&r->g)) /* NVLink runs keep their description */
        snprintf(buf + len, n - len, " eff_pcie=%g", r->k.eff_pcie);
    len = strlen(buf);
    if (len < n && r->k.kv_reread > 0)
        snprintf(buf + len, n - len, " kv_reread=%g", r->k.kv_reread);
    len = strlen(buf);
    if (len < n && r->k.ridge_loss > 0)
        snprintf(buf + len, n - len, " ridge_loss=%g", r->k.ridge_loss);
    len = strlen(buf);
    if (len < n && r->fp8) /* runs without FP8 math keep their description */
        snprintf(buf + len, n - len, " eff_fp8=%g", r->k.eff_fp8);
}

static void roofline_free(void *self) { free(self); }

static const cost_model_vt roofline_vt = {
    .name = "roofline",
    .step_s = roofline_step_s,
    .free = roofline_free,
    .describe = roofline_describe,
    .overhead_s = roofline_overhead_s,
    .run_init = roofline_run_init,
};

static int eff_ok(double e) { return isfinite(e) && e > 0 && e <= 1; }
static int time_ok(double t) { return isfinite(t) && t >= 0; }

int cost_roofline_create_par(const model_spec *m, const gpu_spec *g, const model_par *p,
                             const cost_roofline_consts *k, cost_model *out, kvs_err *err)
{
    int rc = model_check_par(m, p, err);
    if (rc)
        return rc;
    const int64_t tp = p->tp;
    if (!eff_ok(k->eff_gemm) || !eff_ok(k->eff_attn) || !eff_ok(k->eff_hbm) ||
        !eff_ok(k->eff_nvlink) || !time_ok(k->collective_lat_s) ||
        !time_ok(k->step_overhead_s) || !time_ok(k->step_overhead_seq_s) ||
        !time_ok(k->kernel_lat_s) || !time_ok(k->collective_lat_peer_s) ||
        !time_ok(k->gemm_dim_half) || !eff_ok(k->eff_pcie) ||
        !(isfinite(k->kv_reread) && k->kv_reread >= 0 && k->kv_reread <= 1) ||
        !(isfinite(k->ridge_loss) && k->ridge_loss >= 0 && k->ridge_loss <= 1) ||
        !eff_ok(k->eff_fp8))
        return kvs_errf(err, KVS_EINVAL,
                        "--cost: roofline efficiencies must be in (0, 1] and times >= 0");
    if (!(g->fp16_flops > 0 && g->hbm_Bps > 0 && g->nvlink_Bps > 0))
        return kvs_errf(err, KVS_EINVAL, "--gpu: %s lacks FLOP/s or bandwidth figures",
                        g->name);
    roofline *r = malloc(sizeof *r);
    if (!r)
        return kvs_errf(err, KVS_ENOMEM, "--cost: out of memory");
    r->m = *m;
    r->g = *g;
    r->tp = tp;
    r->p = *p;
    r->k = *k;
    r->link_Bps = link_is_pcie(g) ? g->host_link_Bps * k->eff_pcie : g->nvlink_Bps * k->eff_nvlink;
    /* the weights' precision sets the peak (AUTO: fp16_flops); FP8 math
     * reaches eff_fp8 of the share FP16 math reaches */
    const double peak_w = gpu_peak_flops(g, (model_dtype)m->weight_dtype);
    const int fp8 = m->weight_dtype == MODEL_DTYPE_FP8 && g->fp8_flops > 0;
    r->any_nonlinear = 0;
    r->fp8 = 0;
    for (int i = 0; i < MODEL_OP_COUNT; i++) {
        model_op op = (model_op)i;
        int expert = op == MODEL_OP_MOE_GATE_UP || op == MODEL_OP_MOE_DOWN;
        int at_w = !(m->quant_experts_only && !expert);
        r->peak[i] = at_w ? peak_w : g->fp16_flops;
        if (at_w && fp8) {
            r->peak[i] *= k->eff_fp8;
            r->fp8 = 1;
        }
        r->repeats[i] = model_op_repeats_par(m, p, op);
        double d = gemm_dim(m, tp, op);
        r->shape[i] = d > 0 && k->gemm_dim_half > 0 ? (d + k->gemm_dim_half) / d : 1.0;
        r->nonlinear[i] = r->repeats[i] > 0 && model_op_is_nonlinear(op);
        r->any_nonlinear |= r->nonlinear[i];
    }
    /* K and V of one stored token in one layer: 2 * kv heads * head_dim
     * (MLA: the latent and its rotary key), on this cp rank's share */
    double kv_layer_bytes =
        2.0 * (double)model_kv_heads_per_gpu(m, tp) * (double)m->head_dim * (double)m->dtype_bytes;
    if (m->attn_type == MODEL_ATTN_MLA || m->kv_bits || p->cp > 1) {
        double kvb = m->kv_bits ? (double)m->kv_bits / 8.0 : (double)m->dtype_bytes;
        kv_layer_bytes = m->attn_type == MODEL_ATTN_MLA
                             ? (double)(m->kv_lora_rank + m->qk_rope_head_dim) * kvb
                             : 2.0 * (double)model_kv_heads_per_gpu(m, tp) *
                                   (double)m->head_dim * kvb;
        kv_layer_bytes /= (double)p->cp;
    }
    /* per-head K/V re-reads: only plain (MHA/GQA/MQA) attention, unsplit KV */
    const double kvh = (double)model_kv_heads_per_gpu(m, tp);
    const double group = (double)(m->heads / tp) / kvh;
    r->kv_extra = k->kv_reread > 0 && group > 1 && m->attn_type != MODEL_ATTN_MLA && p->cp == 1
                      ? k->kv_reread * (group - 1.0) * 2.0 * kvh * (double)m->head_dim *
                            (m->kv_bits ? (double)m->kv_bits / 8.0 : (double)m->dtype_bytes)
                      : 0.0;
    r->cached_kv_s = (double)r->repeats[MODEL_OP_ATTN_PREFILL] * kv_layer_bytes /
                     (g->hbm_Bps * k->eff_hbm);
    roofline_precompute(r);
    roofline_terms(r);
    out->vt = &roofline_vt;
    out->self = r;
    return KVS_OK;
}

int cost_roofline_create_with(const model_spec *m, const gpu_spec *g, int64_t tp,
                              const cost_roofline_consts *k, cost_model *out,
                              kvs_err *err)
{
    model_par p = {tp, 1, 1};
    return cost_roofline_create_par(m, g, &p, k, out, err);
}

int cost_roofline_create(const model_spec *m, const gpu_spec *g, int64_t tp,
                         cost_model *out, kvs_err *err)
{
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    return cost_roofline_create_with(m, g, tp, &k, out, err);
}

int cost_roofline_breakdown(const cost_model *c, const cost_batch *b,
                            double compute_s[MODEL_OP_COUNT],
                            double memory_s[MODEL_OP_COUNT])
{
    if (!c || c->vt != &roofline_vt)
        return KVS_EINVAL;
    roofline_ops(c->self, b, compute_s, memory_s);
    return KVS_OK;
}
