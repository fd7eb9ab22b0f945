/* cpu_backend.c — the "cpu" backend: host memory, fp32 storage (so
 * read/write are copies), device info from /proc, the thread's CPU clock as
 * timer, and the reference ops of cpu_ops.c.  Always available; it is what
 * tests and CPU calibration run. */
#include "../base/str.h"
#include "cpu_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct cpu_state {
    float *scratch;     /* attention scores, grown on demand */
    int64_t scratch_n;  /* floats in scratch */
    double timer_t0;    /* thread CPU time at timer_start, seconds */
} cpu_state;

static int cpu_open(void **self, kvs_err *err)
{
    *self = calloc(1, sizeof(cpu_state));
    return *self ? KVS_OK : kvs_errf(err, KVS_ENOMEM, "out of memory (cpu backend)");
}

static void cpu_close(void *self)
{
    cpu_state *s = self;
    if (s)
        free(s->scratch);
    free(s);
}

float *cpu_scratch(void *self, int64_t n)
{
    cpu_state *s = self;
    if (n > s->scratch_n) {
        float *p = realloc(s->scratch, (size_t)n * sizeof *p);
        if (!p)
            return NULL;
        s->scratch = p;
        s->scratch_n = n;
    }
    return s->scratch;
}

/* Value of the first "key<spaces>: value" line of a /proc file, or "". */
static void proc_field(const char *path, const char *key, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
            continue;
        char *v = strchr(line, ':');
        if (!v)
            continue;
        for (v++; *v == ' ' || *v == '\t'; v++)
            ;
        v[strcspn(v, "\n")] = 0;
        snprintf(out, n, "%s", v);
        break;
    }
    fclose(f);
}

static int cpu_info(void *self, kernels_device_info *out, kvs_err *err)
{
    (void)self, (void)err;
    proc_field("/proc/cpuinfo", "model name", out->name, sizeof out->name);
    if (!out->name[0])
        snprintf(out->name, sizeof out->name, "unknown CPU");
    char total[64], avail[64];
    proc_field("/proc/meminfo", "MemTotal", total, sizeof total);
    proc_field("/proc/meminfo", "MemAvailable", avail, sizeof avail);
    out->mem_total_bytes = strtoll(total, NULL, 10) * 1024; /* "123 kB" */
    out->mem_free_bytes = strtoll(avail, NULL, 10) * 1024;
    out->peak_mem_Bps = 0.0;
    char esc[512];
    str_json_escape(esc, sizeof esc, out->name);
    snprintf(out->props_json, sizeof out->props_json,
             "{\"cpu_model\":\"%s\",\"online_cpus\":%ld,\"threads_used\":1,"
             "\"mem_total_bytes\":%lld,\"storage\":\"fp32\"}",
             esc, sysconf(_SC_NPROCESSORS_ONLN), (long long)out->mem_total_bytes);
    return KVS_OK;
}

static int cpu_alloc(void *self, size_t bytes, void **ptr, kvs_err *err)
{
    (void)self;
    *ptr = calloc(1, bytes);
    return *ptr ? KVS_OK
                : kvs_errf(err, KVS_ENOMEM, "cpu: out of memory allocating %zu bytes", bytes);
}

static void cpu_free(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}

static int cpu_write_act(void *self, void *dst, const float *src, int64_t n, kvs_err *err)
{
    (void)self, (void)err;
    memcpy(dst, src, (size_t)n * sizeof(float));
    return KVS_OK;
}

static int cpu_read_act(void *self, const void *src, float *dst, int64_t n, kvs_err *err)
{
    (void)self, (void)err;
    memcpy(dst, src, (size_t)n * sizeof(float));
    return KVS_OK;
}

static int cpu_copy_bytes(void *self, void *dst, const void *src, size_t n, kvs_err *err)
{
    (void)self, (void)err;
    memcpy(dst, src, n);
    return KVS_OK;
}

static int cpu_read_bytes(void *self, const void *src, void *dst, size_t n, kvs_err *err)
{
    return cpu_copy_bytes(self, dst, src, n, err);
}

static int cpu_sync(void *self, kvs_err *err)
{
    (void)self, (void)err;
    return KVS_OK;
}

/* The ops run on the calling thread only, so its CPU clock measures their
 * work and not the time other processes take the core: timings stay
 * stable on a shared machine. */
static int thread_time(double *s, kvs_err *err)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return kvs_errf(err, KVS_EDEVICE, "cpu: clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    *s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return KVS_OK;
}

static int cpu_timer_start(void *self, kvs_err *err)
{
    return thread_time(&((cpu_state *)self)->timer_t0, err);
}

static int cpu_timer_stop(void *self, double *seconds, kvs_err *err)
{
    double t = 0.0;
    int rc = thread_time(&t, err);
    *seconds = rc == KVS_OK ? t - ((cpu_state *)self)->timer_t0 : 0.0;
    return rc;
}

static int64_t cpu_workspace(void *self, int64_t n_decode, int64_t max_ctx,
                             int64_t max_prefill_q, int64_t heads, int64_t kv_heads,
                             int64_t head_dim)
{
    (void)self, (void)n_decode, (void)max_prefill_q, (void)heads, (void)kv_heads, (void)head_dim;
    return max_ctx * (int64_t)sizeof(float);
}

const kernels_backend_vt kernels_cpu_vt = {
    .name = "cpu",
    .storage = "fp32",
    .act_bytes = sizeof(float),
    .open = cpu_open,
    .close = cpu_close,
    .info = cpu_info,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .write_act = cpu_write_act,
    .read_act = cpu_read_act,
    .write_bytes = cpu_copy_bytes,
    .read_bytes = cpu_read_bytes,
    .sync = cpu_sync,
    .rmsnorm = cpu_rmsnorm,
    .gemm = cpu_gemm,
    .rope = cpu_rope,
    .kv_append = cpu_kv_append,
    .decode_attention = cpu_attention,
    .prefill_attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .gather_rows = cpu_gather_rows,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .attn_workspace_bytes = cpu_workspace,
};
