/* fuzz_model_conf.c — libFuzzer target for model config files, through the
 * public model_lookup (a path containing '/' is read as a .conf file).
 *
 * On success every key must be within its documented bound, kv_heads must
 * divide heads, the name must be a non-empty string, and the arithmetic the
 * simulator runs on a model (parameter, weight and KV sizes, KV capacity on
 * every built-in GPU at every valid tp) must not overflow (UBSan aborts on
 * signed overflow); a file holding a NUL byte must be refused (the text
 * after it would be skipped silently).  On failure the error must be one
 * line naming the file. */
#include <string.h>

#include "../../models/model.h"
#include "fuzz_util.h"

static fuzz_file conf_file;

static void check_model(const model_spec *m)
{
    const struct {
        int64_t v, max;
    } k[] = {{m->hidden, 65536},      {m->layers, 1024},       {m->heads, 1024},
             {m->kv_heads, 1024},     {m->head_dim, 1024},     {m->intermediate, 1048576},
             {m->vocab, 4194304},     {m->max_ctx, 16777216},  {m->dtype_bytes, 4}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].v < 1 || k[i].v > k[i].max)
            fuzz_fail("a key outside its documented bounds", NULL);
    if (m->dtype_bytes == 3 || m->heads % m->kv_heads)
        fuzz_fail("dtype_bytes 3 or kv_heads not dividing heads", NULL);
    if (!m->name[0] || !memchr(m->name, '\0', sizeof m->name))
        fuzz_fail("empty or unterminated name", NULL);

    kvs_err err;
    if (model_param_count(m) < 1)
        fuzz_fail("parameter count < 1", NULL);
    for (int64_t tp = 1; tp <= 1024; tp *= 2) {
        if (model_check_tp(m, tp, &err))
            continue;
        if (model_weight_bytes(m, tp) < 1 || model_kv_bytes_per_token(m, tp) < 1 ||
            model_kv_heads_per_gpu(m, tp) < 1)
            fuzz_fail("non-positive weight or KV size", NULL);
        for (size_t g = 0; g < gpu_builtin_count(); g++) {
            kv_capacity cap;
            /* Capacity may legitimately fail (weights do not fit); it must
             * not overflow or crash. */
            (void)model_kv_capacity(m, gpu_builtin_at(g), tp, 0.9, 16, 8192, 256, &cap, &err);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, 0};
    if (conf_file.path[0] == '\0')
        fuzz_file_init(&conf_file, "model.conf");
    fuzz_file_set(&conf_file, data, size);
    model_spec m;
    kvs_err err = {{0}};
    int rc = model_lookup(conf_file.path, &m, &err);
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, conf_file.path);
        return 0;
    }
    /* Nothing is skipped silently: text after a NUL byte is not ignored. */
    if (memchr(data, '\0', size))
        fuzz_fail("a config with a NUL byte was accepted", NULL);
    check_model(&m);
    return 0;
}
