/* fuzz_cost_spec.c — libFuzzer target for the --cost spec string
 * (cost_model_create: "affine:c0,c1,c2,c3" or "roofline[:key=value,...]").
 * Specs naming a constants file ("file=") are skipped: they would read
 * whatever path the fuzzer makes up (test_cost_consts.c covers files).
 *
 * On success the model must describe itself on one line and give a step time
 * that is a number >= 0 (never NaN) for batches from empty to the largest the
 * simulator forms; on failure the error must be one line naming --cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../cost/cost.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    static model_spec m;
    static gpu_spec g;
    if (!m.layers) {
        kvs_err e;
        if (model_lookup("llama-3-8b", &m, &e) || gpu_lookup("a100-80g", &g, &e))
            fuzz_fail("built-in model or GPU missing", &e);
    }
    char *spec = fuzz_strndup(data, size);
    if (strstr(spec, "file")) {
        free(spec);
        return 0;
    }
    cost_model c = {0};
    kvs_err err = {{0}};
    int rc = cost_model_create(spec, &m, &g, 1, &c, &err);
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, "--cost");
        free(spec);
        return 0;
    }
    char desc[512];
    cost_model_describe(&c, desc, sizeof desc);
    for (const char *p = desc; *p; p++)
        if ((unsigned char)*p < 0x20)
            fuzz_fail("control character in the description", NULL);
    const cost_batch batches[] = {
        {.tokens = 0},
        {.tokens = 1, .prefill_sq = 1, .n_prefill = 1},
        {.tokens = 256, .kv_read = 256 * 8192, .n_decode = 256},
        {.tokens = INT64_C(1) << 32, .kv_read = INT64_C(1) << 40,
         .prefill_sq = INT64_C(1) << 62, .n_prefill = 1 << 20, .n_decode = 1 << 20},
    };
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        double s = cost_step_s(&c, &batches[i]);
        if (isnan(s) || s < 0)
            fuzz_fail("step time NaN or negative", NULL);
    }
    cost_model_free(&c);
    free(spec);
    return 0;
}
