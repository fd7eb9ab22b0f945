/* model_ops.c — FLOPs and bytes of each operation of one step on one GPU
 * (the table and notation are in model.h).  The LLaMA shapes take the
 * original expressions term for term, so their step costs stay
 * bit-identical; the 2026 fields (quantized weights, KV dtype, MLA, MoE,
 * sliding windows, ep, cp) take the branches documented in model.h. */
#include "model.h"

#include <math.h>

static const char *const op_names[MODEL_OP_COUNT] = {
    "embed",    "qkv",      "attn_prefill", "attn_decode",  "o_proj",       "mlp_gate_up",
    "mlp_down", "elementwise", "lm_head",   "allreduce",    "logits_gather",
    "attn_prefill_swa", "attn_decode_swa", "moe_router", "moe_gate_up", "moe_down",
    "alltoall", "cp_exchange",
};

const char *model_op_name(model_op op)
{
    return (unsigned)op < MODEL_OP_COUNT ? op_names[op] : "?";
}

int model_op_is_collective(model_op op)
{
    return op == MODEL_OP_ALLREDUCE || op == MODEL_OP_LOGITS_GATHER ||
           op == MODEL_OP_ALLTOALL || op == MODEL_OP_CP_EXCHANGE;
}

int model_op_is_nonlinear(model_op op)
{
    return op == MODEL_OP_MOE_GATE_UP || op == MODEL_OP_MOE_DOWN ||
           op == MODEL_OP_ATTN_PREFILL_SWA || op == MODEL_OP_ATTN_DECODE_SWA;
}

double model_moe_expected_experts(double e, double k, double tokens)
{
    if (tokens <= 0 || e <= 0 || k <= 0)
        return 0.0;
    if (k >= e)
        return e;
    /* 1 - (1 - k/e)^tokens, through log1p/expm1 for large token counts */
    return e * -expm1(tokens * log1p(-k / e));
}

static int64_t window_layers(const model_spec *m)
{
    return m->window > 0 ? m->window_layers : 0;
}

int64_t model_op_repeats_par(const model_spec *m, const model_par *p, model_op op)
{
    const int64_t tp = p->tp, ep = p->ep, cp = p->cp;
    switch (op) {
    case MODEL_OP_EMBED:
    case MODEL_OP_LM_HEAD:
        return 1;
    case MODEL_OP_ALLREDUCE:
        return tp > 1 ? 2 * m->layers : 0;
    case MODEL_OP_LOGITS_GATHER:
        return tp > 1 ? 1 : 0;
    case MODEL_OP_QKV:
    case MODEL_OP_O_PROJ:
    case MODEL_OP_ELEMENTWISE:
        return m->layers;
    case MODEL_OP_ATTN_PREFILL:
    case MODEL_OP_ATTN_DECODE:
        return m->layers - window_layers(m);
    case MODEL_OP_ATTN_PREFILL_SWA:
    case MODEL_OP_ATTN_DECODE_SWA:
        return window_layers(m);
    case MODEL_OP_MLP_GATE_UP:
    case MODEL_OP_MLP_DOWN:
        return model_dense_mlp_layers(m);
    case MODEL_OP_MOE_ROUTER:
    case MODEL_OP_MOE_GATE_UP:
    case MODEL_OP_MOE_DOWN:
        return model_moe_layers(m);
    case MODEL_OP_ALLTOALL:
        return ep > 1 ? 2 * model_moe_layers(m) : 0;
    case MODEL_OP_CP_EXCHANGE:
        return cp > 1 ? m->layers : 0;
    default:
        return 0;
    }
}

int64_t model_op_repeats(const model_spec *m, int64_t tp, model_op op)
{
    model_par p = {tp, 1, 1};
    return model_op_repeats_par(m, &p, op);
}

/* GEMM [M,K] x [K,N]: 2MKN FLOPs; weights K*N, input M*K, output M*N. */
static void gemm(double M, double K, double N, double b, double *flops, double *bytes)
{
    *flops = 2.0 * M * K * N;
    *bytes = (K * N + M * K + M * N) * b;
}

/* As gemm with weights of wb bytes per element (scales included). */
static void gemm_w(double M, double K, double N, double b, double wb, double *flops,
                   double *bytes)
{
    if (wb == b) {
        gemm(M, K, N, b, flops, bytes);
        return;
    }
    *flops = 2.0 * M * K * N;
    *bytes = K * N * wb + (M * K + M * N) * b;
}

static void add_gemm(double M, double K, double N, double b, double wb, double *f, double *y)
{
    double f1, y1;
    gemm_w(M, K, N, b, wb, &f1, &y1);
    *f += f1;
    *y += y1;
}

/* The per-GPU widths and counts an op's cost is written in (notation of
 * docs/cost-models.md, section 4): T tokens, Tp prefill tokens, R
 * sequences, H hidden, D head_dim, hq query heads, q / k query and K (= V)
 * widths, I intermediate, Vg vocabulary share, b activation bytes, ring the
 * all-reduce's (tp - 1) / tp; weight and KV element bytes; MLA widths;
 * expert widths; and this cp rank's attention work (sliding windows cap
 * it). */
typedef struct op_dims {
    int64_t tp, ep, cp;
    double T, Tp, R, H, D, hq, q, k, I, Vg, b, ring;
    double wb, wb_dense, kvb;   /* weight bytes, non-expert weight bytes, KV bytes */
    int mla, swa;               /* MLA attention; a sliding-window op */
    double kl, rope, qk, vd, ql, out_w;
    double Im, rows, gu;        /* expert width, expert rows, gate|up width in I */
    double kv_read, prefill_sq; /* this cp rank's, window-capped */
} op_dims;

static void op_dims_init(const model_spec *m, const model_par *p, model_op op,
                         const model_op_counts *c, op_dims *d)
{
    const int64_t tp = p->tp < 1 ? 1 : p->tp;
    d->tp = tp;
    d->ep = p->ep < 1 ? 1 : p->ep;
    d->cp = p->cp < 1 ? 1 : p->cp;
    d->T = (double)c->tokens;
    d->Tp = c->tokens > c->n_decode ? (double)(c->tokens - c->n_decode) : 0.0;
    d->R = (double)(c->n_prefill + c->n_decode);
    d->H = (double)m->hidden;
    d->D = (double)m->head_dim;
    d->hq = (double)(m->heads / tp);
    d->q = d->hq * d->D;
    d->k = (double)model_kv_heads_per_gpu(m, tp) * d->D;
    d->I = (double)(m->intermediate / tp);
    d->Vg = (double)((m->vocab + tp - 1) / tp);
    d->b = (double)m->dtype_bytes;
    d->ring = (double)(tp - 1) / (double)tp;
    d->wb = model_weight_elem_bytes(m);
    d->wb_dense = m->quant_experts_only ? d->b : d->wb;
    d->kvb = m->kv_bits ? (double)m->kv_bits / 8.0 : d->b;
    d->mla = m->attn_type == MODEL_ATTN_MLA;
    d->kl = (double)m->kv_lora_rank;
    d->rope = (double)m->qk_rope_head_dim;
    d->qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
    d->vd = (double)m->v_head_dim;
    d->ql = (double)m->q_lora_rank;
    d->out_w = d->mla ? d->hq * d->vd : d->q;
    d->Im = (double)(m->moe_intermediate / tp);
    d->rows = d->T * (double)(m->experts_per_tok + m->shared_experts);
    d->gu = m->mlp_plain ? 1.0 : 2.0;
    d->kv_read = (double)c->kv_read;
    d->prefill_sq = (double)c->prefill_sq;
    if (d->cp > 1) {
        d->kv_read /= (double)d->cp;
        d->prefill_sq /= (double)d->cp;
    }
    d->swa = op == MODEL_OP_ATTN_PREFILL_SWA || op == MODEL_OP_ATTN_DECODE_SWA;
    if (d->swa) {
        const double W = (double)m->window;
        d->kv_read = fmin((double)c->kv_read, (double)c->n_decode * W) / (double)d->cp;
        d->prefill_sq = fmin((double)c->prefill_sq, 2.0 * W * d->Tp) / (double)d->cp;
    }
}

/* Attention of a prefill (decode = 0) or decode op: MLA over its latent,
 * plain attention with the KV at the activations' bytes (the LLaMA
 * expressions, kept as they were), or a KV of other bytes, a window or a
 * cp share. */
static void attn_cost(const model_op_counts *c, const op_dims *d, int decode, double *f,
                      double *y)
{
    const double hq = d->hq, D = d->D, q = d->q, k = d->k, b = d->b, kvb = d->kvb;
    const int plain = kvb == b && !d->swa && d->cp == 1;
    if (!decode) {
        if (d->mla) {
            *f = hq * (d->qk + d->vd) * d->prefill_sq;
            *y = d->Tp * hq * (2.0 * d->qk + 2.0 * d->vd) * b;
        } else if (plain) {
            *f = 2.0 * hq * D * (double)c->prefill_sq;
            *y = (2.0 * q + 2.0 * k) * d->Tp * b;
        } else {
            *f = 2.0 * hq * D * d->prefill_sq;
            *y = 2.0 * q * d->Tp * b + 2.0 * k * d->Tp * kvb;
        }
    } else if (d->mla) {
        *f = 2.0 * d->kv_read * hq * (2.0 * d->kl + d->rope);
        *y = d->kv_read * (d->kl + d->rope) * kvb +
             (double)c->n_decode * hq * (2.0 * d->kl + d->rope) * b;
    } else if (plain) {
        *f = 4.0 * (double)c->kv_read * hq * D;
        *y = (2.0 * k * (double)c->kv_read + 2.0 * q * (double)c->n_decode) * b;
    } else {
        *f = 4.0 * d->kv_read * hq * D;
        *y = 2.0 * k * d->kv_read * kvb + 2.0 * q * (double)c->n_decode * b;
    }
}

/* Norms, rotary embedding, the KV-cache write and the SiLU product, per
 * token (a MoE layer's product over the experts each token uses). */
static void elementwise_cost(const model_spec *m, const op_dims *d, double *f, double *y)
{
    const double T = d->T, H = d->H;
    double Ie = d->I, kc = d->k, qr = d->q + d->k;
    if (m->experts > 0 && m->layers > 0)
        Ie = ((double)model_dense_mlp_layers(m) * d->I +
              (double)model_moe_layers(m) * (double)(m->experts_per_tok + m->shared_experts) *
                  d->Im) /
             (double)m->layers;
    if (d->mla) {
        kc = (d->kl + d->rope) / 2.0;  /* one latent written per token */
        qr = d->hq * d->rope + d->rope; /* rotary parts only */
    }
    double norm_el = 2.0 * 4.0 * T * H;   /* 2 fused add+norms, 4 moves */
    double rope_el = 2.0 * T * qr;        /* read and write Q and K */
    double cache_el = 4.0 * T * kc;       /* read K,V; write the cache */
    double silu_el = (d->gu + 1.0) * T * Ie; /* read gate|up, write product */
    *f = 4.0 * 2.0 * T * H + 3.0 * T * qr + 4.0 * T * Ie;
    *y = (norm_el + rope_el + cache_el + silu_el) * d->b;
}

/* A MoE layer's gate|up or down GEMMs: the experts this GPU reads are its
 * share of those the ep copies' tokens touch, plus the shared ones. */
static void moe_cost(const model_spec *m, const op_dims *d, model_op op, double *f, double *y)
{
    double touched = model_moe_expected_experts((double)m->experts, (double)m->experts_per_tok,
                                                d->T * (double)d->ep) /
                         (double)d->ep +
                     (double)m->shared_experts;
    double in = op == MODEL_OP_MOE_GATE_UP ? d->H : d->Im;
    double outw = op == MODEL_OP_MOE_GATE_UP ? d->gu * d->Im : d->H;
    *f = 2.0 * d->rows * in * outw;
    *y = touched * in * outw * d->wb + d->rows * (in + outw) * d->b;
}

void model_op_cost_par(const model_spec *m, const model_par *p, model_op op,
                       const model_op_counts *c, double *flops, double *bytes)
{
    op_dims d;
    op_dims_init(m, p, op, c, &d);
    const double T = d.T, H = d.H, b = d.b;
    double f = 0, y = 0;
    switch (op) {
    case MODEL_OP_EMBED:
        y = 2.0 * T * H * b;
        break;
    case MODEL_OP_QKV:
        if (d.mla) {
            /* q_a|kv_a (held whole), then q_b and kv_b split by heads; no
             * q LoRA: q straight from the hidden state */
            add_gemm(T, H, d.ql + d.kl + d.rope, b, d.wb_dense, &f, &y);
            add_gemm(T, d.ql > 0 ? d.ql : H, d.hq * d.qk, b, d.wb_dense, &f, &y);
            add_gemm(T, d.kl, d.hq * ((double)m->qk_nope_head_dim + d.vd), b, d.wb_dense, &f,
                     &y);
        } else {
            gemm_w(T, H, d.q + 2.0 * d.k, b, d.wb_dense, &f, &y);
        }
        break;
    case MODEL_OP_ATTN_PREFILL:
    case MODEL_OP_ATTN_PREFILL_SWA:
        attn_cost(c, &d, 0, &f, &y);
        break;
    case MODEL_OP_ATTN_DECODE:
    case MODEL_OP_ATTN_DECODE_SWA:
        attn_cost(c, &d, 1, &f, &y);
        break;
    case MODEL_OP_O_PROJ:
        gemm_w(T, d.out_w, H, b, d.wb_dense, &f, &y);
        break;
    case MODEL_OP_MLP_GATE_UP:
        gemm_w(T, H, d.gu * d.I, b, d.wb_dense, &f, &y);
        break;
    case MODEL_OP_MLP_DOWN:
        gemm_w(T, d.I, H, b, d.wb_dense, &f, &y);
        break;
    case MODEL_OP_ELEMENTWISE:
        elementwise_cost(m, &d, &f, &y);
        break;
    case MODEL_OP_LM_HEAD:
        gemm(d.R, H, d.Vg, b, &f, &y);
        f += 4.0 * T * H;
        y += 2.0 * T * H * b;
        break;
    case MODEL_OP_ALLREDUCE:
        y = d.tp > 1 ? 2.0 * d.ring * T * H * b : 0.0;
        break;
    case MODEL_OP_LOGITS_GATHER:
        y = d.tp > 1 ? d.ring * d.R * (double)m->vocab * b : 0.0;
        break;
    case MODEL_OP_MOE_ROUTER:
        gemm(T, H, (double)m->experts, b, &f, &y);
        break;
    case MODEL_OP_MOE_GATE_UP:
    case MODEL_OP_MOE_DOWN:
        moe_cost(m, &d, op, &f, &y);
        break;
    case MODEL_OP_ALLTOALL:
        y = d.ep > 1 ? (double)(d.ep - 1) / (double)d.ep * T * (double)m->experts_per_tok * H * b
                     : 0.0;
        break;
    case MODEL_OP_CP_EXCHANGE:
        y = d.cp > 1 ? 2.0 * (double)(d.cp - 1) / (double)d.cp * T * (d.out_w + d.hq) * 4.0 : 0.0;
        break;
    default:
        break;
    }
    *flops = f;
    *bytes = y;
}

void model_op_cost(const model_spec *m, int64_t tp, model_op op,
                   const model_op_counts *c, double *flops, double *bytes)
{
    model_par p = {tp < 1 ? 1 : tp, 1, 1};
    model_op_cost_par(m, &p, op, c, flops, bytes);
}
