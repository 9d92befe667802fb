/*
 * native_bench.c - message rate of small WRITEs through simnic's C API and through the
 * SHIFT layer, failover time, and backup state per connection. Prints JSON lines.
 *
 *   native_bench rate ITER BATCH REPS   raw, layer (direct), layer (copying WRs),
 *                                       interleaved, REPS times each
 *   native_bench raw N BATCH            one variant only (for callgrind)
 *   native_bench shift N BATCH
 *   native_bench copy N BATCH
 *   native_bench failover REPS          error completion -> first backup success
 *   native_bench state                  bytes of backup state per connection
 */
#define _POSIX_C_SOURCE 199309L
#include "shift_sim.h"
#include "simnic_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { MAXB = 256 };

typedef struct {
    sn_fabric f;
    sn_qp qp[2];
    sn_cq cq[2];
    uint8_t *mem[2];
    uint32_t lkey, rkey;
} raw_t;

static void raw_open(raw_t *r)
{
    memset(r, 0, sizeof *r);
    sn_fabric_create(NULL, &r->f);
    for (int h = 0; h < 2; h++) {
        size_t size;
        sn_host_mem(r->f, h, &r->mem[h], &size);
        sn_create_cq(r->f, h, 1024, &r->cq[h]);
        struct sn_qp_init_attr a = {r->cq[h], r->cq[h], MAXB, MAXB, SHIFT_MAX_INLINE};
        sn_create_qp(r->f, h, 1, &a, &r->qp[h]);
    }
    sn_mr m;
    sn_reg_mr(r->f, 0, 1, (uint64_t)(uintptr_t)r->mem[0], 4096, 15, &m);
    sn_mr_keys(m, &r->lkey, NULL);
    sn_reg_mr(r->f, 1, 1, (uint64_t)(uintptr_t)r->mem[1], 4096, 15, &m);
    sn_mr_keys(m, NULL, &r->rkey);
    sn_connect(r->qp[0], r->qp[1]);
}

static void fill(struct shift_send_wr *w, int batch, uint64_t src, uint32_t lkey, uint64_t dst,
                 uint32_t rkey)
{
    memset(w, 0, sizeof *w * (size_t)batch);
    for (int i = 0; i < batch; i++) {
        w[i].wr_id = (uint64_t)i;
        w[i].opcode = SHIFT_WR_RDMA_WRITE;
        w[i].num_sge = 1;
        w[i].sg.addr = src + 8 * (uint64_t)i;
        w[i].sg.length = 8;
        w[i].sg.lkey = lkey;
        w[i].remote_addr = dst + 8 * (uint64_t)i;
        w[i].rkey = rkey;
        w[i].next = i + 1 < batch ? &w[i + 1] : NULL;
    }
    w[batch - 1].send_flags = SHIFT_SEND_SIGNALED;
}

static long run_raw(raw_t *r, long n, int batch)
{
    struct shift_send_wr w[MAXB];
    struct shift_wc wc[4];
    fill(w, batch, (uint64_t)(uintptr_t)r->mem[0], r->lkey, (uint64_t)(uintptr_t)r->mem[1],
         r->rkey);
    long done = 0;
    while (done < n) {
        if (sn_post_send(r->qp[0], w, NULL))
            return -1;
        sn_pump(r->f, 1L << 30);
        if (sn_poll_cq(r->cq[0], 4, wc) != 1 || wc[0].status)
            return -1;
        done += batch;
    }
    return done;
}

typedef struct {
    sn_fabric f;
    shift_conn c;
    shift_ep ep[2];
    uint8_t *mem[2];
    struct shift_mr_keys k[2];
} lay_t;

/* flags: 0 (direct: the layer reads the WRs to replay back from the send queue) or
 * SHIFT_EP_COPY_POSTS (the layer copies every WR, as over a backend that cannot) */
static void lay_open(lay_t *L, uint32_t max_wr, unsigned flags)
{
    memset(L, 0, sizeof *L);
    struct sn_fabric_attr fa = {.retry_cnt = 1, .rnr_retry = 7};
    sn_fabric_create(&fa, &L->f);
    struct shift_conn_attr ca = {SHIFT_DESIGN_SHIFT, max_wr, max_wr, 3, flags};
    shift_sim_connect(L->f, &ca, &L->c);
    for (int h = 0; h < 2; h++) {
        size_t size;
        shift_sim_ep(L->c, h, &L->ep[h]);
        sn_host_mem(L->f, h, &L->mem[h], &size);
        shift_sim_reg_mr(L->c, h, (uint64_t)(uintptr_t)L->mem[h], 4096, 15, &L->k[h]);
    }
}

static void lay_close(lay_t *L)
{
    shift_sim_close(L->c);
    sn_fabric_destroy(L->f);
}

static long run_shift(lay_t *L, long n, int batch)
{
    struct shift_send_wr w[MAXB];
    struct shift_wc wc[4];
    fill(w, batch, (uint64_t)(uintptr_t)L->mem[0], L->k[0].lkey, (uint64_t)(uintptr_t)L->mem[1],
         L->k[1].rkey);
    long done = 0;
    while (done < n) {
        if (shift_post_send(L->ep[0], w, NULL))
            return -1;
        sn_pump(L->f, 1L << 30);
        if (shift_poll_cq(L->ep[0], 4, wc) != 1 || wc[0].status)
            return -1;
        done += batch;
    }
    return done;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* one timed run of variant v (0 raw, 1 layer direct, 2 layer copying): WRs per second */
static double timed(int v, raw_t *r, lay_t *L, long iter, int batch)
{
    double t0 = now_s();
    long n = v == 0 ? run_raw(r, iter, batch) : run_shift(&L[v - 1], iter, batch);
    double t1 = now_s();
    return n < 0 ? -1.0 : (double)iter / (t1 - t0);
}

static int bench_rate(long iter, int batch, int reps)
{
    raw_t r;
    lay_t L[2];
    raw_open(&r);
    lay_open(&L[0], MAXB, 0);
    lay_open(&L[1], MAXB, SHIFT_EP_COPY_POSTS);
    double rate[3][64], ratio[2][64];
    for (int v = 0; v < 3; v++)
        timed(v, &r, L, iter / 4, batch); /* warm up */
    for (int i = 0; i < reps; i++) {
        /* rotate the order so that drift hurts no variant */
        for (int j = 0; j < 3; j++) {
            int v = (i + j) % 3;
            rate[v][i] = timed(v, &r, L, iter, batch);
            if (rate[v][i] < 0)
                return 1;
        }
        ratio[0][i] = rate[1][i] / rate[0][i];
        ratio[1][i] = rate[2][i] / rate[0][i];
    }
    printf("{\"kind\": \"rate\", \"batch\": %d, \"wrs\": %ld, \"reps\": %d, "
           "\"raw_wr_per_s\": %.0f, \"shift_wr_per_s\": %.0f, \"copy_wr_per_s\": %.0f, "
           "\"ratio\": %.4f, \"copy_ratio\": %.4f}\n",
           batch, iter, reps, median(rate[0], reps), median(rate[1], reps),
           median(rate[2], reps), median(ratio[0], reps), median(ratio[1], reps));
    lay_close(&L[0]);
    lay_close(&L[1]);
    sn_fabric_destroy(r.f);
    return 0;
}

/* Failover time: a stream of WRITE + WRITE_WITH_IMM rounds; NIC 1 of A fails; the
 * clock starts when the application's poll meets the error completion (the trigger)
 * and stops at the first successful completion from the backup path. */
static int bench_failover(int reps)
{
    double us[256];
    double rtts = 0;
    for (int i = 0; i < reps && i < 256; i++) {
        lay_t L;
        lay_open(&L, 64, 0);
        for (uint64_t k = 1; k <= 8; k++) {
            struct shift_recv_wr rw = {k, NULL, {0, 0, 0}, 0};
            shift_post_recv(L.ep[1], &rw, NULL);
            struct shift_send_wr w[2];
            memset(w, 0, sizeof w);
            uint64_t v = k;
            w[0].opcode = SHIFT_WR_RDMA_WRITE;
            w[0].send_flags = SHIFT_SEND_INLINE;
            w[0].num_sge = 1;
            w[0].sg.addr = (uint64_t)(uintptr_t)&v;
            w[0].sg.length = 8;
            w[0].remote_addr = (uint64_t)(uintptr_t)L.mem[1];
            w[0].rkey = L.k[1].rkey;
            w[0].next = &w[1];
            w[1].wr_id = k;
            w[1].opcode = SHIFT_WR_RDMA_WRITE_WITH_IMM;
            w[1].send_flags = SHIFT_SEND_SIGNALED;
            shift_post_send(L.ep[0], w, NULL);
        }
        sn_nic_fail(L.f, 0, 1);
        struct shift_wc wc;
        double t0 = now_s();
        int r = shift_poll_step(L.ep[0], &wc); /* the error completion: trigger */
        if (r != 2)
            return 1;
        int got = 0, hops = 0;
        while (!got && hops < 1000) {
            /* the hosts act on what arrived: layers, applications, NICs */
            for (int h = 0; h < 2; h++)
                while (shift_progress(L.ep[h]) > 0)
                    ;
            while (shift_poll_step(L.ep[1], &wc) > 0)
                ;
            while ((r = shift_poll_step(L.ep[0], &wc)) > 0)
                if (r == 1 && wc.status == SHIFT_WC_SUCCESS)
                    got = 1;
            if (got)
                break;
            for (int h = 0; h < 2; h++)
                for (int p = 1; p <= 2; p++)
                    while (sn_transmit(L.f, h, p) > 0)
                        ;
            /* the wire: everything in flight arrives (one one-way latency) */
            int inflight[3][2];
            for (int p = 1; p <= 2; p++)
                for (int d = 0; d < 2; d++)
                    inflight[p][d] = sn_wire_len(L.f, p, d);
            for (int p = 1; p <= 2; p++)
                for (int d = 0; d < 2; d++)
                    for (int n = inflight[p][d]; n > 0; n--)
                        sn_deliver(L.f, p, d);
            hops++;
        }
        double t1 = now_s();
        us[i] = (t1 - t0) * 1e6;
        rtts = hops / 2.0;
        lay_close(&L);
    }
    printf("{\"kind\": \"failover\", \"reps\": %d, \"median_us\": %.2f, "
           "\"one_way_latencies\": %.0f, \"round_trips\": %.1f}\n",
           reps, median(us, reps), rtts * 2, rtts);
    return 0;
}

static int bench_state(void)
{
    uint32_t sizes[] = {64, 256, 1024};
    for (int i = 0; i < 3; i++) {
        lay_t L;
        lay_open(&L, sizes[i], 0);
        struct shift_ep_info a, b;
        shift_ep_query(L.ep[0], &a);
        shift_ep_query(L.ep[1], &b);
        /* what simnic holds for the backup QP pair of the connection */
        uint64_t qp = (uint64_t)(sizes[i] + 1) * sizeof(sn_wqe) +
                      (uint64_t)sizes[i] * sizeof(sn_rwqe) + sizeof(sn_qp_s) +
                      (uint64_t)(2 * sizes[i] + 9) *
                          (sizeof(struct shift_wc) + sizeof(struct sn_cqe_src));
        printf("{\"kind\": \"state\", \"max_wr\": %u, \"layer_bytes_requester\": %llu, "
               "\"layer_bytes_responder\": %llu, \"pend_entry\": %llu, "
               "\"backup_qp_bytes_per_host\": %llu}\n",
               sizes[i], (unsigned long long)a.backup_state_bytes,
               (unsigned long long)b.backup_state_bytes,
               (unsigned long long)(shift_backup_state_bytes(2, 1) -
                                    shift_backup_state_bytes(1, 1)),
               (unsigned long long)qp);
        lay_close(&L);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: native_bench rate|raw|shift|copy|failover|state ...\n");
        return 2;
    }
    const char *m = argv[1];
    if (!strcmp(m, "rate") && argc == 5)
        return bench_rate(atol(argv[2]), atoi(argv[3]), atoi(argv[4]) > 64 ? 64 : atoi(argv[4]));
    if ((!strcmp(m, "raw") || !strcmp(m, "shift") || !strcmp(m, "copy")) && argc == 4) {
        long n = atol(argv[2]);
        int batch = atoi(argv[3]);
        if (batch < 1 || batch > MAXB)
            return 2;
        long done;
        if (!strcmp(m, "raw")) {
            raw_t r;
            raw_open(&r);
            done = run_raw(&r, n, batch);
            sn_fabric_destroy(r.f);
        } else {
            lay_t L;
            lay_open(&L, MAXB, strcmp(m, "copy") ? 0 : SHIFT_EP_COPY_POSTS);
            done = run_shift(&L, n, batch);
            lay_close(&L);
        }
        printf("{\"kind\": \"%s\", \"wrs\": %ld}\n", m, done);
        return done < 0;
    }
    if (!strcmp(m, "failover") && argc == 3)
        return bench_failover(atoi(argv[2]));
    if (!strcmp(m, "state"))
        return bench_state();
    fprintf(stderr, "bad arguments\n");
    return 2;
}
