/* profile.h — fitting a calibrated cost profile (cost/profile.h) from kernel
 * measurements (calibrate.h).
 *
 * Token-sized ops and the LM head become tables of measured medians,
 * attention ops non-negative least squares over the cost_batch features,
 * and the per-step overhead o0 + o1 n_seqs a least-squares line through
 * (measured - summed ops) over whole steps of every batch size, unclamped;
 * "layer" points (whole decoder layers) are compared with the sum of their
 * ops and reported as the "layer" error (cost/profile.h gives the model it
 * predicts with).
 */
#ifndef VALIDATE_PROFILE_H
#define VALIDATE_PROFILE_H

#include <stddef.h>

#include "../base/kvs.h"
#include "../cost/profile.h"
#include "../models/model.h"
#include "calibrate.h"

/* Fit a profile for model m from measured points (every op of
 * profile_op_at must have at least one point; steps are optional).
 * Cost: O(points x 2^features). */
int profile_fit(const model_spec *m, const calib_point *pts, size_t n, profile **out,
                kvs_err *err);
#endif
