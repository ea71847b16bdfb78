/* Single-pass loops of the graph layer: nesting, CSR, topological order, longest path, slack,
 * binding edges. Plain C over caller-allocated numpy buffers, called through ctypes
 * (bottleneck_oracle/graph/_kernels.py documents each function). O(nodes + edges) each. */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

/* Rows sorted by (lane, start, -duration); point 2i = start of row i, 2i+1 its end. */
i64 lane_nesting(i64 n, const i64 *lane, const i64 *start, i64 *end, i64 tol, int32_t *parent,
                 int16_t *depth, i64 *src, i64 *dst, int32_t *owner, i64 *overlaps) {
    i64 *stack = malloc(sizeof(i64) * (n + 1));
    i64 m = 0, i = 0;
    *overlaps = 0;
    while (i < n) {
        i64 cur = lane[i], top = 0, prev = -1;
        while (i < n && lane[i] == cur) {
            i64 s = start[i];
            while (top > 0 && end[stack[top - 1]] <= s) {
                i64 j = stack[top - 1];
                if (prev >= 0) { src[m] = prev; dst[m] = 2 * j + 1; owner[m] = (int32_t)j; m++; }
                prev = 2 * j + 1;
                top--;
            }
            parent[i] = -1;
            depth[i] = 0;
            if (top > 0) {
                i64 p = stack[top - 1];
                parent[i] = (int32_t)p;
                depth[i] = depth[p] + 1;
                if (end[i] > end[p]) { if (end[i] - end[p] > tol) (*overlaps)++; end[i] = end[p]; }
            }
            if (prev >= 0) {
                src[m] = prev; dst[m] = 2 * i;
                owner[m] = top > 0 ? (int32_t)stack[top - 1] : -1;
                m++;
            }
            prev = 2 * i;
            stack[top++] = i;
            i++;
        }
        while (top > 0) {
            i64 j = stack[--top];
            src[m] = prev; dst[m] = 2 * j + 1; owner[m] = (int32_t)j; m++;
            prev = 2 * j + 1;
        }
    }
    free(stack);
    return m;
}

/* Counting sort of edge ids by key: indptr[n+1], order[E]; stable. */
void csr(i64 e, const i64 *keys, i64 n, i64 *indptr, i64 *order) {
    memset(indptr, 0, sizeof(i64) * (n + 1));
    for (i64 k = 0; k < e; k++) indptr[keys[k] + 1]++;
    for (i64 v = 0; v < n; v++) indptr[v + 1] += indptr[v];
    i64 *fill = malloc(sizeof(i64) * (n + 1));
    memcpy(fill, indptr, sizeof(i64) * (n + 1));
    for (i64 k = 0; k < e; k++) order[fill[keys[k]]++] = k;
    free(fill);
}

/* Kahn's algorithm over the edges in the CSRs; returns how many nodes were ordered (fewer: a cycle). */
i64 topological_order(i64 n, const i64 *in_ptr, const i64 *dst, const i64 *out_ptr, const i64 *out_order,
                      i64 *order) {
    i64 *indeg = malloc(sizeof(i64) * (n > 0 ? n : 1));
    for (i64 v = 0; v < n; v++) indeg[v] = in_ptr[v + 1] - in_ptr[v];
    i64 head = 0, tail = 0;
    for (i64 v = 0; v < n; v++) if (indeg[v] == 0) order[tail++] = v;
    while (head < tail) {
        i64 u = order[head++];
        for (i64 k = out_ptr[u]; k < out_ptr[u + 1]; k++) {
            i64 v = dst[out_order[k]];
            if (--indeg[v] == 0) order[tail++] = v;
        }
    }
    free(indeg);
    return tail;
}

/* Longest distance from any source; pulls over in-edges, the earlier edge wins ties. */
void longest_path(i64 n_order, const i64 *order, const i64 *src, const i64 *weight, const i64 *in_ptr,
                  const i64 *in_order, i64 *dist, i64 *pred) {
    for (i64 i = 0; i < n_order; i++) {
        i64 v = order[i], best = 0, arg = -1;
        for (i64 k = in_ptr[v]; k < in_ptr[v + 1]; k++) {
            i64 ed = in_order[k];
            if (weight[ed] < 0) continue;  /* absent */
            i64 d = dist[src[ed]] + weight[ed];
            if (arg < 0 || d > best) { best = d; arg = ed; }
        }
        dist[v] = arg >= 0 ? best : 0;
        pred[v] = arg;
    }
}

/* lf starts as the deadlines; becomes min(deadline, min over successors of lf - w). */
void latest_finish(i64 n_order, const i64 *order, const i64 *dst, const i64 *weight, const i64 *out_ptr,
                   const i64 *out_order, i64 *lf) {
    for (i64 i = n_order - 1; i >= 0; i--) {
        i64 u = order[i];
        for (i64 k = out_ptr[u]; k < out_ptr[u + 1]; k++) {
            i64 ed = out_order[k];
            if (weight[ed] < 0) continue;
            i64 cand = lf[dst[ed]] - weight[ed];
            if (cand < lf[u]) lf[u] = cand;
        }
    }
}

/* Edges of the path ending at sink, latest first, until a point at or before stop. */
i64 walk_back(const i64 *pred, const i64 *src, const i64 *t, i64 sink, i64 stop, i64 *out) {
    i64 m = 0, v = sink;
    while (pred[v] >= 0) {
        i64 ed = pred[v];
        out[m++] = ed;
        v = src[ed];
        if (t[v] <= stop) break;
    }
    return m;
}

/* Marks every point on the paths back from the sinks (each walked until a point already marked). */
void mark_back(const i64 *pred, const i64 *src, const i64 *sinks, i64 k, uint8_t *seen) {
    for (i64 i = 0; i < k; i++) {
        i64 v = sinks[i];
        while (!seen[v]) {
            seen[v] = 1;
            if (pred[v] < 0) break;
            v = src[pred[v]];
        }
    }
}

enum { CROSS = 0, BUSY = 1, GAP = 2, BLOCKING = 3, LANE_GAP = 4, COMM = 5 };

/* For every point, the in-edge that released it; weights that replay the observed times. */
i64 select_binding(i64 n, const i64 *t, const i64 *src, const int8_t *mode, const i64 *minlag,
                   const i64 *in_ptr, i64 *in_order, i64 wake_tol, i64 contra_tol, i64 *weight,
                   i64 *binding, uint8_t *late) {
    i64 contradicted = 0;
    for (i64 v = 0; v < n; v++) {
        i64 lo = in_ptr[v], hi = in_ptr[v + 1], chain = -1, best = -1, best_arr = 0;
        binding[v] = -1;
        late[v] = 0;
        if (lo == hi) continue;
        for (i64 k = lo; k < hi; k++) if (mode[in_order[k]] != CROSS) chain = in_order[k];
        if (chain >= 0 && mode[chain] == BUSY) {
            best = chain;
        } else if (chain >= 0 && mode[chain] == GAP) {
            /* the latest dependency that arrived while the thread idled released it */
            best = chain;
            for (i64 k = lo; k < hi; k++) {
                i64 ed = in_order[k];
                if (mode[ed] != CROSS || t[src[ed]] > t[v]) continue;
                i64 arr = t[src[ed]] + minlag[ed];
                if (arr >= t[src[chain]] && arr <= t[v] + contra_tol && (best == chain || arr > best_arr)) {
                    best = ed; best_arr = arr;
                }
            }
            if (best != chain && t[v] - best_arr > wake_tol) late[v] = 1;
        } else {
            if (chain >= 0) { best = chain; best_arr = t[src[chain]] + minlag[chain]; }
            for (i64 k = lo; k < hi; k++) {
                i64 ed = in_order[k];
                if (ed == chain) continue;
                i64 arr = t[src[ed]] + minlag[ed];
                if (arr > t[v] + contra_tol || t[src[ed]] > t[v]) continue;
                if (best < 0 || arr > best_arr) { best = ed; best_arr = arr; }
            }
        }
        for (i64 k = lo; k < hi; k++) {
            i64 ed = in_order[k], obs = t[v] - t[src[ed]];
            if (obs < 0 || (ed != best && t[src[ed]] + minlag[ed] > t[v] + contra_tol)) {
                weight[ed] = -1; contradicted++;
            } else if (ed == best) {
                weight[ed] = obs;
            } else {
                weight[ed] = minlag[ed] < obs ? minlag[ed] : obs;
            }
        }
        if (best >= 0 && weight[best] >= 0) {
            binding[v] = best;
            for (i64 k = lo; k < hi; k++) /* the binding edge first: longest_path keeps it on ties */
                if (in_order[k] == best) { in_order[k] = in_order[lo]; in_order[lo] = best; break; }
        }
    }
    return contradicted;
}

/* An importable module, so Python can locate this library (its functions are called via ctypes). */
static struct PyModuleDef native_module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&native_module); }

/* Longest paths between boundary points that run through no other boundary point: a graph reduced to
 * its boundary (replay/rank_replay.py). Points in topological order; boundary[v] >= 0 names a boundary
 * point. A point inside keeps, per boundary point it is reached from, its longest distance (its labels,
 * appended to a pool); a boundary point reached writes one row (from, to, distance) per boundary point
 * it is reached from. best[] (n_boundary, all INT64_MIN) and touched[] are scratch. Returns the rows
 * written, or -1 when the pool or the rows would pass their capacity (the caller grows them). */
i64 boundary_paths(i64 n_order, const i64 *order, const i64 *src, const i64 *weight, const i64 *in_ptr,
                   const i64 *in_order, const i64 *boundary, i64 *lab_ptr, i64 *lab_len, i64 *pool_from,
                   i64 *pool_d, i64 pool_cap, i64 *best, i64 *touched, i64 *out_from, i64 *out_to,
                   i64 *out_d, i64 out_cap) {
    i64 pool_n = 0, out_n = 0;
    for (i64 i = 0; i < n_order; i++) {
        i64 v = order[i], nt = 0;
        for (i64 k = in_ptr[v]; k < in_ptr[v + 1]; k++) {
            i64 ed = in_order[k], w = weight[ed], u = src[ed];
            if (w < 0) continue;  /* absent */
            i64 lo = boundary[u] >= 0 ? 0 : lab_ptr[u], hi = boundary[u] >= 0 ? 1 : lab_ptr[u] + lab_len[u];
            for (i64 j = lo; j < hi; j++) {
                i64 s = boundary[u] >= 0 ? boundary[u] : pool_from[j];
                i64 d = (boundary[u] >= 0 ? 0 : pool_d[j]) + w;
                if (best[s] == INT64_MIN) { touched[nt++] = s; best[s] = d; }
                else if (d > best[s]) best[s] = d;
            }
        }
        i64 *to_from = pool_from, *to_d = pool_d, *n = &pool_n, cap = pool_cap;
        if (boundary[v] >= 0) { to_from = out_from; to_d = out_d; n = &out_n; cap = out_cap; }
        if (*n + nt > cap) return -1;
        lab_ptr[v] = *n;
        lab_len[v] = boundary[v] >= 0 ? 0 : nt;
        for (i64 j = 0; j < nt; j++) {
            i64 s = touched[j];
            to_from[*n] = s;
            to_d[*n] = best[s];
            if (boundary[v] >= 0) out_to[*n] = boundary[v];
            (*n)++;
            best[s] = INT64_MIN;
        }
    }
    return out_n;
}
