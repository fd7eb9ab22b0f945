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
#include <sys/stat.h>
#include <unistd.h>

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

/* The shipped Hugging Face configs (models/hf/HUB/config.json), written
 * from the published config.json of each checkpoint. */
static const struct {
    const char *alias; /* short name for --model */
    const char *hub;   /* ORG/NAME as on the Hugging Face hub */
} aliases[] = {
    {"llama-7b-hf", "huggyllama/llama-7b"},
    {"llama-13b-hf", "huggyllama/llama-13b"},
    {"llama-65b-hf", "huggyllama/llama-65b"},
    {"llama-2-7b-hf", "meta-llama/Llama-2-7b-hf"},
    {"llama-2-13b-hf", "meta-llama/Llama-2-13b-hf"},
    {"llama-2-70b-hf", "meta-llama/Llama-2-70b-hf"},
    {"llama-3-8b-hf", "meta-llama/Meta-Llama-3-8B"},
    {"llama-3-70b-hf", "meta-llama/Meta-Llama-3-70B"},
    {"llama-3.1-8b", "meta-llama/Llama-3.1-8B"},
    {"llama-3.1-70b", "meta-llama/Llama-3.1-70B"},
    {"llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct"},
    {"qwen3-8b", "Qwen/Qwen3-8B"},
    {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"},
    {"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"},
    {"deepseek-v3", "deepseek-ai/DeepSeek-V3"},
    {"gemma-2-9b", "google/gemma-2-9b"},
    {"gemma-3-27b", "google/gemma-3-27b-it"},
    {"opt-13b", "facebook/opt-13b"},
    {"gpt-oss-120b", "openai/gpt-oss-120b"},
    {"gpt-oss-20b", "openai/gpt-oss-20b"},
};

#define N_ALIAS (sizeof aliases / sizeof aliases[0])

size_t model_alias_count(void) { return N_ALIAS; }

const char *model_alias_at(size_t i, const char **hub_path)
{
    if (i >= N_ALIAS)
        return NULL;
    if (hub_path)
        *hub_path = aliases[i].hub;
    return aliases[i].alias;
}

int model_alias_path(const char *name, char *buf, size_t n, kvs_err *err)
{
    const char *hub = NULL;
    for (size_t i = 0; name && i < N_ALIAS && !hub; i++)
        if (!strcmp(name, aliases[i].alias) || !strcmp(name, aliases[i].hub))
            hub = aliases[i].hub;
    if (!hub)
        return kvs_errf(err, KVS_EINVAL, "--model: '%s' is not a shipped model", name ? name : "");
    snprintf(buf, n, "models/hf/%s/config.json", hub);
    if (access(buf, R_OK) == 0)
        return KVS_OK;
#ifdef KVSIM_SOURCE_DIR
    /* run from anywhere: fall back to the source tree's copy */
    snprintf(buf, n, "%s/models/hf/%s/config.json", KVSIM_SOURCE_DIR, hub);
    if (access(buf, R_OK) == 0)
        return KVS_OK;
#endif
    return kvs_errf(err, KVS_EIO, "--model: %s: cannot find models/hf/%s/config.json", name,
                    hub);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_path(const char *name)
{
    return strchr(name, '/') != NULL || ends_with(name, ".conf");
}

int model_lookup(const char *name, model_spec *out, kvs_err *err)
{
    if (!name || !*name)
        return kvs_errf(err, KVS_EINVAL, "--model: empty model name");
    for (size_t i = 0; i < N_BUILTIN; i++) {
        if (!strcmp(name, builtins[i].spec.name)) {
            *out = builtins[i].spec;
            return KVS_OK;
        }
    }
    char path[4096];
    for (size_t i = 0; i < N_ALIAS; i++) {
        if (!strcmp(name, aliases[i].alias) || !strcmp(name, aliases[i].hub)) {
            int rc = model_alias_path(name, path, sizeof path, err);
            if (rc)
                return rc;
            rc = model_hf_read(path, out, err);
            if (rc == KVS_OK)
                snprintf(out->name, sizeof out->name, "%s", aliases[i].alias);
            return rc;
        }
    }
    if (ends_with(name, ".json") || is_dir(name))
        return model_hf_read(name, out, err);
    if (is_path(name))
        return model_conf_read(name, out, err);
    char known[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < N_BUILTIN && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                i ? ", " : "", builtins[i].spec.name);
    for (size_t i = 0; i < N_ALIAS && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, ", %s", aliases[i].alias);
    return kvs_errf(err, KVS_EINVAL,
                    "--model: unknown model '%s' (known: %s; or a path to a config.json, "
                    "a folder holding one, or a .conf file)",
                    name, known);
}

int model_lookup_name(const char *name, model_spec *out, kvs_err *err)
{
    if (!name)
        name = "";
    for (size_t i = 0; i < N_BUILTIN; i++)
        if (!strcmp(name, builtins[i].spec.name))
            return model_lookup(name, out, err);
    for (size_t i = 0; i < N_ALIAS; i++)
        if (!strcmp(name, aliases[i].alias) || !strcmp(name, aliases[i].hub))
            return model_lookup(name, out, err);
    if (ends_with(name, ".conf") || ends_with(name, ".json") || is_dir(name)) {
        kvs_err e;
        if (model_lookup(name, out, &e) == KVS_OK)
            return KVS_OK;
        return kvs_errf(err, KVS_EINVAL, "model config '%.200s' does not read as a model", name);
    }
    return kvs_errf(err, KVS_EINVAL,
                    "model '%.200s' is not a built-in model name (a stored model is resolved by "
                    "name only, and opened as a file only when it names a .conf, a .json or a "
                    "directory)",
                    name);
}
