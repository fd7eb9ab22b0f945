/* model_ops.c — FLOPs and bytes of each operation of one step on one GPU
 * (the table and notation are in model.h). */
#include "model.h"

static const char *const op_names[MODEL_OP_COUNT] = {
    "embed",    "qkv",      "attn_prefill", "attn_decode",  "o_proj",       "mlp_gate_up",
    "mlp_down", "elementwise", "lm_head",   "allreduce",    "logits_gather",
};

const char *model_op_name(model_op op)
{
    return (unsigned)op < MODEL_OP_COUNT ? op_names[op] : "?";
}

int model_op_is_collective(model_op op)
{
    return op == MODEL_OP_ALLREDUCE || op == MODEL_OP_LOGITS_GATHER;
}

int64_t model_op_repeats(const model_spec *m, int64_t tp, model_op op)
{
    switch (op) {
    case MODEL_OP_EMBED:
    case MODEL_OP_LM_HEAD:
        return 1;
    case MODEL_OP_ALLREDUCE:
        return tp > 1 ? 2 * m->layers : 0;
    case MODEL_OP_LOGITS_GATHER:
        return tp > 1 ? 1 : 0;
    case MODEL_OP_QKV:
    case MODEL_OP_ATTN_PREFILL:
    case MODEL_OP_ATTN_DECODE:
    case MODEL_OP_O_PROJ:
    case MODEL_OP_MLP_GATE_UP:
    case MODEL_OP_MLP_DOWN:
    case MODEL_OP_ELEMENTWISE:
        return m->layers;
    default:
        return 0;
    }
}

/* GEMM [M,K] x [K,N]: 2MKN FLOPs; weights K*N, input M*K, output M*N. */
static void gemm(double M, double K, double N, double b, double *flops, double *bytes)
{
    *flops = 2.0 * M * K * N;
    *bytes = (K * N + M * K + M * N) * b;
}

void model_op_cost(const model_spec *m, int64_t tp, model_op op,
                   const model_op_counts *c, double *flops, double *bytes)
{
    if (tp < 1)
        tp = 1;
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
    double f = 0, y = 0;

    switch (op) {
    case MODEL_OP_EMBED:
        y = 2.0 * T * H * b;
        break;
    case MODEL_OP_QKV:
        gemm(T, H, q + 2.0 * k, b, &f, &y);
        break;
    case MODEL_OP_ATTN_PREFILL:
        f = 2.0 * hq * D * (double)c->prefill_sq;
        y = (2.0 * q + 2.0 * k) * Tp * b;
        break;
    case MODEL_OP_ATTN_DECODE:
        f = 4.0 * (double)c->kv_read * hq * D;
        y = (2.0 * k * (double)c->kv_read + 2.0 * q * (double)c->n_decode) * b;
        break;
    case MODEL_OP_O_PROJ:
        gemm(T, q, H, b, &f, &y);
        break;
    case MODEL_OP_MLP_GATE_UP:
        gemm(T, H, 2.0 * I, b, &f, &y);
        break;
    case MODEL_OP_MLP_DOWN:
        gemm(T, I, H, b, &f, &y);
        break;
    case MODEL_OP_ELEMENTWISE: {
        double norm_el = 2.0 * 4.0 * T * H;     /* 2 fused add+norms, 4 moves */
        double rope_el = 2.0 * T * (q + k);     /* read and write Q and K */
        double cache_el = 4.0 * T * k;          /* read K,V; write the cache */
        double silu_el = 3.0 * T * I;           /* read gate|up, write product */
        f = 4.0 * 2.0 * T * H + 3.0 * T * (q + k) + 4.0 * T * I;
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
    default:
        break;
    }
    *flops = f;
    *bytes = y;
}
