/* fuzz_model_hf.c — libFuzzer target for Hugging Face config.json files,
 * through model_hf_read (the reader model_lookup uses for .json paths).
 *
 * On success the shape must be within the bounds model_hf_read documents
 * (those of model_conf_read, experts <= 4096), kv_heads must divide heads,
 * top-k must not exceed the experts, and the arithmetic the simulator runs
 * (total/active parameters, weights under tp x ep, KV per token and per
 * request under cp, the fit on every built-in GPU, a roofline model and a
 * few of its steps) must not overflow (UBSan aborts on signed overflow) or
 * give negative sizes.  On failure the error must be one line naming the
 * file, KVS_EINVAL. */
#include <string.h>

#include "../../cost/cost.h"
#include "../../models/model.h"
#include "fuzz_util.h"

static fuzz_file hf_file;

static void check_model(const model_spec *m)
{
    const struct {
        int64_t v, max;
    } k[] = {{m->hidden, 65536},      {m->layers, 1024},       {m->heads, 1024},
             {m->kv_heads, 1024},     {m->head_dim, 1024},     {m->intermediate, 1048576},
             {m->vocab, 4194304},     {m->max_ctx, 16777216},  {m->dtype_bytes, 2}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].v < 1 || k[i].v > k[i].max)
            fuzz_fail("a shape outside its documented bounds", NULL);
    if (m->heads % m->kv_heads || m->experts < 0 || m->experts > 4096 ||
        m->experts_per_tok > m->experts || m->dense_layers > m->layers ||
        m->window_layers > m->layers)
        fuzz_fail("inconsistent heads, experts or layers", NULL);
    if (!m->name[0] || !memchr(m->name, '\0', sizeof m->name))
        fuzz_fail("empty or unterminated name", NULL);
    if (model_params_total(m) < 1 || model_params_active(m) < 1 ||
        model_params_active(m) > model_params_total(m))
        fuzz_fail("parameter counts out of order", NULL);
    kvs_err err;
    cost_roofline_consts k0;
    cost_roofline_consts_default(&k0);
    for (int64_t tp = 1; tp <= 64; tp *= 4) {
        for (int64_t ep = 1; ep <= 4; ep *= 4) {
            model_par p = {tp, ep, ep == 1 ? 1 : 3};
            if (model_check_par(m, &p, &err))
                continue;
            if (model_weight_bytes_par(m, &p) < 1 || model_kv_bytes_per_token(m, tp) < 1 ||
                model_kv_request_bytes(m, &p, 1000000) < 1)
                fuzz_fail("non-positive weight or KV size", NULL);
            for (size_t g = 0; g < gpu_builtin_count(); g++) {
                model_fit f;
                kv_capacity cap;
                if (model_fit_check(m, gpu_builtin_at(g), &p, 0.9, 8192, 256, &f, &err))
                    fuzz_fail("fit check failed on a valid layout", &err);
                (void)model_kv_capacity_par(m, gpu_builtin_at(g), &p, 0.9, 16, 8192, 256, &cap,
                                            &err);
            }
            cost_model c;
            if (cost_roofline_create_par(m, gpu_builtin_at(0), &p, &k0, &c, &err))
                fuzz_fail("roofline refused a valid layout", &err);
            const cost_batch b[] = {{.tokens = 1, .kv_read = 5000, .n_decode = 1},
                                    {.tokens = 4096, .prefill_sq = 4096LL * 4096,
                                     .n_prefill = 1, .prefill_ctx = 4096, .prefill_cached = 1}};
            for (size_t i = 0; i < 2; i++)
                if (!(cost_step_s(&c, &b[i]) >= 0))
                    fuzz_fail("negative or NaN step time", NULL);
            cost_model_free(&c);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, 0};
    if (hf_file.path[0] == '\0')
        fuzz_file_init(&hf_file, "config.json");
    fuzz_file_set(&hf_file, data, size);
    model_spec m;
    kvs_err err = {{0}};
    int rc = model_hf_read(hf_file.path, &m, &err);
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, hf_file.path);
        return 0;
    }
    check_model(&m);
    return 0;
}
