/* store_image.h — inside store/ only: a new database file written from the
 * recorded image of a fresh one.
 *
 * Creating kvsim's schema with SQL costs a new file about 12 M instructions
 * (each CREATE is parsed, written to sqlite_master and parsed again) and
 * six fsyncs (the switch of an empty file to WAL goes through a rollback
 * journal): 3-4 ms of a 12 ms `kvsim run` of one request.  The image is
 * what that SQL leaves on disk, recorded byte for byte in
 * store/schema_image.c by `KVSIM_WRITE_SCHEMA=1 build/test_schema` (with
 * store/schema_current.c): a WAL-mode file holding the fresh schema and the
 * schema_version row, checkpointed.  store_open writes it when the path
 * names no file yet, and then finds the schema current.
 *
 * The file appears whole or not at all: the image goes to a temporary file
 * beside the target (PATH.kvsim-new-PID-N), which is then hard-linked to
 * the target name (a link never replaces a file another process created
 * meanwhile) and unlinked.
 * Anything that does not fit this (a URI or ":memory:", a path that exists,
 * a stale image, a filesystem without hard links, a full disk) writes
 * nothing and leaves the file to SQLite, the reference path, which
 * $KVSIM_SCHEMA_IMAGE=0 forces.  No fsync here: the first commit syncs the
 * directory when it creates the WAL, and the checkpoint syncs the file, as
 * they do for a file SQLite created.  store_open_new (one `kvsim run` into
 * a new file) takes the temporary file unlinked instead and builds its run
 * in it before store_publish links it (store.h). */
#ifndef STORE_IMAGE_H
#define STORE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* The recording (store/schema_image.c): the file's size in bytes, and its
 * non-zero stretches as {offset, length} pairs whose bytes follow one
 * another in store_schema_image_data; every other byte is zero. */
extern const uint64_t store_schema_image_fingerprint; /* store_schema_fingerprint() it was made at */
extern const uint32_t store_schema_image_size;        /* bytes, a whole number of pages */
extern const uint32_t store_schema_image_nseg;        /* stretches */
extern const uint32_t store_schema_image_seg[][2];    /* [nseg] {offset, length}, bytes */
extern const unsigned char store_schema_image_data[]; /* the stretches' bytes, in order */

/* Whether the recorded image matches the current migrations. */
int store_image_current(void);

/* The image unpacked into a new buffer of store_schema_image_size bytes
 * (the caller frees it); NULL when out of memory.  Cost: O(size). */
unsigned char *store_image_bytes(void);

/* Create `path` from the image if it names no file yet.  Returns 1 when it
 * did, 0 when it wrote nothing (see above).  Cost: one write of the image
 * (about 150 KB) and a link. */
int store_image_create(const char *path);

/* The image written to a new private file beside `path` (its name,
 * PATH.kvsim-new-PID-N, malloc'd; the caller frees it), if `path` names no
 * file yet; NULL when nothing was written.  Nothing links it: store_open_new
 * builds a run in it and store_publish links it to `path`. */
char *store_image_create_private(const char *path);

#endif
