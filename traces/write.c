/* write.c — writing a trace in the native CSV format. */
#include <errno.h>
#include <string.h>

#include "trace.h"

int trace_write_csv(const trace *t, FILE *f, kvs_err *err)
{
    fprintf(f, "arrival_s,prompt_tokens,output_tokens%s\n", t->has_priority ? ",priority" : "");
    for (int64_t i = 0; i < t->n; i++) {
        const trace_req *r = &t->reqs[i];
        if (t->has_priority)
            fprintf(f, "%.9f,%lld,%lld,%d\n", r->arrival_s, (long long)r->prompt_tokens,
                    (long long)r->output_tokens, (int)r->priority);
        else
            fprintf(f, "%.9f,%lld,%lld\n", r->arrival_s, (long long)r->prompt_tokens,
                    (long long)r->output_tokens);
    }
    if (fflush(f) != 0 || ferror(f))
        return kvs_errf(err, KVS_EIO, "writing trace: %s", strerror(errno));
    return KVS_OK;
}
