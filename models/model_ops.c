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

void model_op_cost_par(const model_spec *m, const model_par *p, model_op op,
                       const model_op_counts *c, double *flops, double *bytes)
{
    const int64_t tp = p->tp < 1 ? 1 : p->tp;
    const int64_t ep = p->ep < 1 ? 1 : p->ep, cp = p->cp < 1 ? 1 : p->cp;
    const double T = (double)c->tokens;
    const double Tp = c->tokens > c->n_decode ? (double)(c->tokens - c->n_decode) : 0.0;
    const double R = (double)(c->n_prefill + c->n_decode);
    const double H = (double)m->hidden, D = (double)m->head_dim;
    const double hq = (double)(m->heads / tp);            /* query heads per GPU */
    const double q = hq * D;                               /* query width per GPU */
    const double k = (double)model_kv_heads_per_gpu(m, tp) * D; /* K (= V) width */
    const double I = (double)(m->intermediate / tp);
    const double Vg = (double)((m->vocab + tp - 1) / tp);
    const double b = (double)m->dtype_bytes;
    const double ring = (double)(tp - 1) / (double)tp;
    /* 2026 figures: weight, KV element bytes; MLA widths; expert widths */
    const double wb = model_weight_elem_bytes(m);
    const double wb_dense = m->quant_experts_only ? b : wb; /* non-expert weights */
    const double kvb = m->kv_bits ? (double)m->kv_bits / 8.0 : b;
    const int mla = m->attn_type == MODEL_ATTN_MLA;
    const double kl = (double)m->kv_lora_rank, rope = (double)m->qk_rope_head_dim;
    const double qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
    const double vd = (double)m->v_head_dim, ql = (double)m->q_lora_rank;
    const double out_w = mla ? hq * vd : q; /* attention output width per GPU */
    const double Im = (double)(m->moe_intermediate / tp);
    const double rows = T * (double)(m->experts_per_tok + m->shared_experts);
    const double gu = m->mlp_plain ? 1.0 : 2.0; /* gate|up width in units of I */
    /* attention work this cp rank does: 1/cp of the KV */
    double kv_read = (double)c->kv_read, prefill_sq = (double)c->prefill_sq;
    if (cp > 1) {
        kv_read /= (double)cp;
        prefill_sq /= (double)cp;
    }
    const int swa = op == MODEL_OP_ATTN_PREFILL_SWA || op == MODEL_OP_ATTN_DECODE_SWA;
    if (swa) {
        const double W = (double)m->window;
        kv_read = fmin((double)c->kv_read, (double)c->n_decode * W) / (double)cp;
        prefill_sq = fmin((double)c->prefill_sq, 2.0 * W * Tp) / (double)cp;
    }
    double f = 0, y = 0;

    switch (op) {
    case MODEL_OP_EMBED:
        y = 2.0 * T * H * b;
        break;
    case MODEL_OP_QKV:
        if (mla) {
            /* q_a|kv_a (held whole), then q_b and kv_b split by heads; no
             * q LoRA: q straight from the hidden state */
            add_gemm(T, H, ql + kl + rope, b, wb_dense, &f, &y);
            add_gemm(T, ql > 0 ? ql : H, hq * qk, b, wb_dense, &f, &y);
            add_gemm(T, kl, hq * ((double)m->qk_nope_head_dim + vd), b, wb_dense, &f, &y);
        } else {
            gemm_w(T, H, q + 2.0 * k, b, wb_dense, &f, &y);
        }
        break;
    case MODEL_OP_ATTN_PREFILL:
    case MODEL_OP_ATTN_PREFILL_SWA:
        if (mla) {
            f = hq * (qk + vd) * prefill_sq;
            y = Tp * hq * (2.0 * qk + 2.0 * vd) * b;
        } else if (kvb == b && !swa && cp == 1) {
            f = 2.0 * hq * D * (double)c->prefill_sq;
            y = (2.0 * q + 2.0 * k) * Tp * b;
        } else {
            f = 2.0 * hq * D * prefill_sq;
            y = 2.0 * q * Tp * b + 2.0 * k * Tp * kvb;
        }
        break;
    case MODEL_OP_ATTN_DECODE:
    case MODEL_OP_ATTN_DECODE_SWA:
        if (mla) {
            f = 2.0 * kv_read * hq * (2.0 * kl + rope);
            y = kv_read * (kl + rope) * kvb + (double)c->n_decode * hq * (2.0 * kl + rope) * b;
        } else if (kvb == b && !swa && cp == 1) {
            f = 4.0 * (double)c->kv_read * hq * D;
            y = (2.0 * k * (double)c->kv_read + 2.0 * q * (double)c->n_decode) * b;
        } else {
            f = 4.0 * kv_read * hq * D;
            y = 2.0 * k * kv_read * kvb + 2.0 * q * (double)c->n_decode * b;
        }
        break;
    case MODEL_OP_O_PROJ:
        gemm_w(T, out_w, H, b, wb_dense, &f, &y);
        break;
    case MODEL_OP_MLP_GATE_UP:
        gemm_w(T, H, gu * I, b, wb_dense, &f, &y);
        break;
    case MODEL_OP_MLP_DOWN:
        gemm_w(T, I, H, b, wb_dense, &f, &y);
        break;
    case MODEL_OP_ELEMENTWISE: {
        double Ie = I, kc = k, qr = q + k;
        if (m->experts > 0 && m->layers > 0)
            Ie = ((double)model_dense_mlp_layers(m) * I +
                  (double)model_moe_layers(m) *
                      (double)(m->experts_per_tok + m->shared_experts) * Im) /
                 (double)m->layers;
        if (mla) {
            kc = (kl + rope) / 2.0; /* one latent written per token */
            qr = hq * rope + rope;  /* rotary parts only */
        }
        double norm_el = 2.0 * 4.0 * T * H;     /* 2 fused add+norms, 4 moves */
        double rope_el = 2.0 * T * qr;          /* read and write Q and K */
        double cache_el = 4.0 * T * kc;         /* read K,V; write the cache */
        double silu_el = (gu + 1.0) * T * Ie;   /* read gate|up, write product */
        f = 4.0 * 2.0 * T * H + 3.0 * T * qr + 4.0 * T * Ie;
        y = (norm_el + rope_el + cache_el + silu_el) * b;
        break;
    }
    case MODEL_OP_LM_HEAD:
        gemm(R, H, Vg, b, &f, &y);
        f += 4.0 * T * H;
        y += 2.0 * T * H * b;
        break;
    case MODEL_OP_ALLREDUCE:
        y = tp > 1 ? 2.0 * ring * T * H * b : 0.0;
        break;
    case MODEL_OP_LOGITS_GATHER:
        y = tp > 1 ? ring * R * (double)m->vocab * b : 0.0;
        break;
    case MODEL_OP_MOE_ROUTER:
        gemm(T, H, (double)m->experts, b, &f, &y);
        break;
    case MODEL_OP_MOE_GATE_UP:
    case MODEL_OP_MOE_DOWN: {
        /* experts this GPU reads: its share of those the ep copies' tokens
         * touch, plus the shared ones */
        double touched = model_moe_expected_experts((double)m->experts,
                                                    (double)m->experts_per_tok,
                                                    T * (double)ep) /
                             (double)ep +
                         (double)m->shared_experts;
        double in = op == MODEL_OP_MOE_GATE_UP ? H : Im;
        double outw = op == MODEL_OP_MOE_GATE_UP ? gu * Im : H;
        f = 2.0 * rows * in * outw;
        y = touched * in * outw * wb + rows * (in + outw) * b;
        break;
    }
    case MODEL_OP_ALLTOALL:
        y = ep > 1 ? (double)(ep - 1) / (double)ep * T * (double)m->experts_per_tok * H * b
                   : 0.0;
        break;
    case MODEL_OP_CP_EXCHANGE:
        y = cp > 1 ? 2.0 * (double)(cp - 1) / (double)cp * T * (out_w + hq) * 4.0 : 0.0;
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
