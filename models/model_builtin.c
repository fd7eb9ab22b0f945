/* model_builtin.c — the built-in model shapes and model_lookup.
 *
 * Figures are those of the released configs (Hugging Face config.json of
 * the LLaMA 1, Llama 2 and Llama 3 checkpoints: hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
 * max_position_embeddings).  head_dim = hidden / heads = 128 for all of them.
 */
#include "model.h"

#include <stdio.h>
#include <string.h>

typedef struct model_builtin {
    model_spec spec;  /* the shape */
    const char *note; /* shown by `kvsim models`; "" if none */
} model_builtin;

/* Designated fields: the 2026 additions of model_spec stay 0 (LLaMA). */
#define LLAMA(n, h, l, hd_, kv, d, i, v, ctx, b)                                        \
    {                                                                                  \
        .name = n, .hidden = h, .layers = l, .heads = hd_, .kv_heads = kv, .head_dim = d, \
        .intermediate = i, .vocab = v, .max_ctx = ctx, .dtype_bytes = b                \
    }

static const model_builtin builtins[] = {
    /* name          hidden layers heads kv  hd   inter  vocab  ctx  dtype */
    {LLAMA("llama-7b", 4096, 32, 32, 32, 128, 11008, 32000, 2048, 2), ""},
    {LLAMA("llama-13b", 5120, 40, 40, 40, 128, 13824, 32000, 2048, 2), ""},
    {LLAMA("llama-65b", 8192, 80, 64, 64, 128, 22016, 32000, 2048, 2), ""},
    {LLAMA("llama-2-7b", 4096, 32, 32, 32, 128, 11008, 32000, 4096, 2), ""},
    {LLAMA("llama-2-13b", 5120, 40, 40, 40, 128, 13824, 32000, 4096, 2), ""},
    {LLAMA("llama-2-70b", 8192, 80, 64, 8, 128, 28672, 32000, 4096, 2), ""},
    /* Llama 3 (Meta-Llama-3-8B / -70B config.json): GQA with 8 KV heads, a
     * 128,256-token vocabulary and an 8,192-token context. */
    {LLAMA("llama-3-8b", 4096, 32, 32, 8, 128, 14336, 128256, 8192, 2), ""},
    {LLAMA("llama-3-70b", 8192, 80, 64, 8, 128, 28672, 128256, 8192, 2), ""},
    /* Not a released model: llama-7b with a single KV head, to show what
     * multi-query attention saves (32x less KV, slightly fewer weights). */
    {LLAMA("llama-7b-mqa", 4096, 32, 32, 1, 128, 11008, 32000, 2048, 2),
     "hypothetical: llama-7b with 1 KV head (MQA), no released checkpoint"},
};

#define N_BUILTIN (sizeof builtins / sizeof builtins[0])

size_t model_builtin_count(void) { return N_BUILTIN; }

const model_spec *model_builtin_at(size_t i)
{
    return i < N_BUILTIN ? &builtins[i].spec : NULL;
}

const char *model_builtin_note(size_t i)
{
    return i < N_BUILTIN ? builtins[i].note : "";
}

static int is_path(const char *name)
{
    size_t n = strlen(name);
    return strchr(name, '/') != NULL || (n >= 5 && !strcmp(name + n - 5, ".conf"));
}

int model_lookup(const char *name, model_spec *out, kvs_err *err)
{
    if (!name || !*name)
        return kvs_errf(err, KVS_EINVAL, "--model: empty model name");
    if (is_path(name))
        return model_conf_read(name, out, err);
    for (size_t i = 0; i < N_BUILTIN; i++) {
        if (!strcmp(name, builtins[i].spec.name)) {
            *out = builtins[i].spec;
            return KVS_OK;
        }
    }
    char known[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < N_BUILTIN && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                i ? ", " : "", builtins[i].spec.name);
    return kvs_errf(err, KVS_EINVAL,
                    "--model: unknown model '%s' (known: %s; or a path to a .conf file)",
                    name, known);
}
