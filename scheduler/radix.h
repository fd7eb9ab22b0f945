/* radix.h — SGLang's radix cache over token identities (docs/semantics-sglang.md,
 * section 6), for the sglang engine (scheduler/sglang.c) and nothing else.
 *
 * The cache is a radix tree whose edges are runs of tokens.  kvsim has no
 * token ids: a token is known by its identity, which the engine gives
 * through a callback (radix_ident_fn): the token at position p of request
 * r is either a token of a shared prefix segment, (segment chain, offset in
 * the segment), equal across requests whose leading segment ids agree, or
 * a token of r alone (r, p).  A node's key is a range of positions of the
 * request that inserted it, so a comparison costs O(runs), not O(tokens).
 *
 * What the tree does is SGLang's RadixCache at page size 1: match_prefix
 * (walk from the root, split the node where the match ends, stamp every
 * node walked), insert (the same walk, a new leaf for what is left; returns
 * the tokens already present), reference locks up the path to the root
 * (inc_lock_ref / dec_lock_ref) that move tokens between the evictable and
 * protected totals, and evict (least recently stamped unlocked leaves
 * first, whole nodes, a parent joining the candidates when its last child
 * goes).  "Time" is a logical clock read where SGLang reads
 * time.monotonic(): once per lookup or insert, whose tick every node it
 * walks takes (the root included), and once for each node it creates (the
 * upper half of a split, a new leaf), so runs are reproducible.
 *
 * Cost: match and insert O(depth + runs compared) plus O(1) expected per
 * child lookup (hash table); lock/unlock O(depth); evict O(log leaves) per
 * node evicted.  Memory: one node per insert and per split, reused after
 * eviction.
 */
#ifndef RADIX_H
#define RADIX_H

#include <stdint.h>

#include "../base/kvs.h"

/* One token's identity: kind 0 a shared segment token (tag = the segment
 * chain, pos = offset in the segment), kind 1 a request's own token (tag =
 * request id, pos = position). */
typedef struct radix_ident {
    uint64_t tag;
    int64_t pos;
    int kind;
} radix_ident;

/* The identity of token p of request r in *id, and how many tokens from p
 * on continue the run (identities (tag, pos + i, kind) for i < the return
 * value), >= 1.  p is below the request's current length. */
typedef int64_t (*radix_ident_fn)(void *ctx, int32_t r, int64_t p, radix_ident *id);

typedef struct radix radix;

#define RADIX_ROOT 0 /* the root node; it holds no tokens and is never evicted */

/* Create an empty tree.  KVS_ENOMEM. */
int radix_init(radix **out, radix_ident_fn ident, void *ctx, kvs_err *err);
void radix_free(radix *t);

/* The longest prefix of tokens [0, len) of request r held in the tree:
 * returns its length in tokens and the node where it ends in *last (the
 * root when nothing matches).  A match that ends inside a node splits it
 * there, so *last ends exactly at the match.  Stamps each node walked
 * with this lookup's tick (SGLang's _match_prefix_helper).  -1 out of memory (tree unchanged but
 * for stamps).  O(depth + runs). */
int64_t radix_match(radix *t, int32_t r, int64_t len, int32_t *last);

/* radix_match's length without changing anything (no split, no stamp):
 * for routers asking what a replica holds.  O(depth + runs). */
int64_t radix_peek(const radix *t, int32_t r, int64_t len);

/* Insert tokens [0, len) of request r: the tokens already in the tree are
 * walked (and stamped, splitting a node where the key leaves it), the rest
 * become a new leaf.  Returns how many of the len tokens were already
 * present (the caller frees its duplicate KV slots for
 * [its matched prefix, that count)); the new tokens count as evictable
 * until locked.  *last, if not NULL, is the node holding token len - 1
 * (as radix_match would return right after).  -1 out of memory.
 * O(depth + runs). */
int64_t radix_insert(radix *t, int32_t r, int64_t len, int32_t *last);

/* inc_lock_ref / dec_lock_ref: every node from `node` up to (not
 * including) the root gains / loses one reference; a node whose count
 * leaves / reaches 0 moves its tokens from evictable to protected / back.
 * O(depth). */
void radix_lock(radix *t, int32_t node);
void radix_unlock(radix *t, int32_t node);

/* Tokens in nodes no request references (evictable) and in referenced
 * ones (protected). */
int64_t radix_evictable(const radix *t);
int64_t radix_protected(const radix *t);

/* Evict unreferenced leaves, least recently stamped first, until at least
 * `tokens` tokens are freed or none is left; returns the tokens freed
 * (whole nodes, so possibly more than asked).  O(log leaves) per node. */
int64_t radix_evict(radix *t, int64_t tokens);

/* The identity callback and its context the tree was made with (for a
 * scratch tree over the same requests). */
radix_ident_fn radix_ident_of(const radix *t);
void *radix_ctx_of(const radix *t);

/* Nodes in the tree (root excluded), and the number of tokens in node. */
int64_t radix_nodes(const radix *t);
int64_t radix_node_len(const radix *t, int32_t node);

/* Check the tree against itself: sizes, locks, heap, child table.
 * Returns 0 or -1 with the first mismatch in why.  For tests.  O(nodes). */
int radix_audit(const radix *t, char *why, int n);

#endif
